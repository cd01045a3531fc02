"""The engine and CLI tests use the llama.cpp fixtures that the root conftest loads."""
