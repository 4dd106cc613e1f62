"""Consumer-group coordination inside the agent: which agent coordinates a group
(``ring``, rendezvous hashing over live agents), a group's state machine (``state``) and
the coordinator that drives it with its timers and reports it (``coordinator``)."""
