"""The browse channel: the console's reads through agents, over a long-poll the agent opens."""
