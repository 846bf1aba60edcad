"""Tapis benchmarks: the service measured side by side with a bare grpc.aio baseline."""
