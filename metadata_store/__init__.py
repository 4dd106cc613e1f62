"""The metadata store (a Django app): topics, partitions, segment files, the batch index,
producer state, committed group offsets and live agents; the commit, fetch-plan and
offset paths every produce and fetch goes through; and the agent API (``/agent/v1/``)."""
