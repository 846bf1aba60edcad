"""The top floor: the process that wires the house (start-up, the server, the settings read from
flags and the environment, admin, health); nothing imports it."""
