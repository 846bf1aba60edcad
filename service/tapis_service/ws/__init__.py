"""The player WebSocket: the GameService's requests in ClientFrame/ServerFrame envelopes
(docs/websocket.md), served beside gRPC in the same process and event loop."""
