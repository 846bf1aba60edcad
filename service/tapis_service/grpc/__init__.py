"""The gRPC transport: the servicer, the call guard and the cut of calls at a stop."""
