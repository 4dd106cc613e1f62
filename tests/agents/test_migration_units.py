"""The migration copier's pure parts: source client options and tolerant response
decoding (issue 30)."""

from __future__ import annotations

import ssl

from aiokafka.protocol.fetch import FetchResponse_v11

from agents.migration_copier import response_dict, source_client_options


def test_plaintext_sources_get_only_the_bootstrap_and_bounds():
    options = source_client_options({"bootstrap": "127.0.0.1:9092", "security": {}})
    assert options["bootstrap_servers"] == "127.0.0.1:9092"
    assert options["security_protocol"] == "PLAINTEXT"
    assert options["request_timeout_ms"] > 0
    assert "sasl_mechanism" not in options and "ssl_context" not in options


def test_sasl_ssl_sources_get_their_credentials_and_a_verifying_context():
    options = source_client_options(
        {
            "bootstrap": "127.0.0.1:9093",
            "security": {
                "protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512",
                "username": "mover",
                "password": "pw",
            },
        }
    )
    assert (options["sasl_mechanism"], options["sasl_plain_username"]) == ("SCRAM-SHA-512", "mover")
    assert options["sasl_plain_password"] == "pw"
    assert isinstance(options["ssl_context"], ssl.SSLContext)
    assert options["ssl_context"].verify_mode == ssl.CERT_REQUIRED


def test_a_fetch_answer_with_a_null_aborted_transactions_array_decodes():
    response = FetchResponse_v11(
        0, 0, 0, [("t", [(0, 0, 10, 10, 0, None, -1, b"")])]
    )  # (aiokafka's own to_object() fails on the null array)
    answer = response_dict(response)
    (partition,) = answer["topics"][0]["partitions"]
    assert partition["aborted_transactions"] == []
    assert (partition["highwater_offset"], partition["log_start_offset"]) == (10, 0)
