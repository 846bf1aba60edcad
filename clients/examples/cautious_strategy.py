"""A strategy to plug into the reference bot:

    PYTHONPATH=clients/examples tapis-bot play --game GAME_ID --strategy cautious_strategy:choose

A strategy is a function (view, legal_actions) -> action (None: pass). This one never slaps in
Bataille Corse (no false slap can cost it cards) and otherwise plays the first legal action.
"""

from collections.abc import Sequence

from tapis.v1 import game_service_pb2 as pb


def choose(view: pb.GameView, legal: Sequence[pb.Action]) -> pb.Action | None:
    for action in legal:
        if action.WhichOneof("action") == "bataille_corse" and \
                action.bataille_corse.WhichOneof("action") == "slap":
            continue
        if action.WhichOneof("action") != "start_next_game":
            return action
    return None
