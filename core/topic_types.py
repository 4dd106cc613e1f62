"""Topic types (docs/ARCHITECTURE.md "Lightning topics"): the `floe.topic.type` config's
name and values, known to the metadata store and the agents alike."""

TOPIC_TYPE = "floe.topic.type"
STANDARD, LIGHTNING = "standard", "lightning"
TOPIC_TYPES = (STANDARD, LIGHTNING)
