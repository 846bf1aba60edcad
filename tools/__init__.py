"""Developer tools: generators run by make targets."""
