"""Throughput history: records and bytes in per cluster and topic, sampled every minute."""
