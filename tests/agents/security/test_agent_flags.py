"""The agent's security flags: --require-sasl, --tls-cert/--tls-key, --tls-client-ca."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agents.config import ConfigError, parse_config
from tests.agents.conftest import REPO

BASE = ["--control-plane-url", "http://127.0.0.1:1", "--agent-key", "k", "--bucket-url", "mem://x"]


def test_flags_and_environment_turn_security_on():
    config = parse_config(
        [*BASE, "--require-sasl", "--tls-cert", "c.pem", "--tls-key", "k.pem"], {}
    )
    assert config.require_sasl and (config.tls_cert, config.tls_key) == ("c.pem", "k.pem")
    assert config.tls_client_ca is None
    from_env = parse_config(
        BASE,
        {
            "FLOE_REQUIRE_SASL": "true",
            "FLOE_TLS_CERT": "c.pem",
            "FLOE_TLS_KEY": "k.pem",
            "FLOE_TLS_CLIENT_CA": "ca.pem",
        },
    )
    assert from_env.require_sasl and from_env.tls_client_ca == "ca.pem"
    assert not parse_config(BASE, {"FLOE_REQUIRE_SASL": "0"}).require_sasl


@pytest.mark.parametrize(
    "argv, environ, message",
    [
        (["--tls-cert", "c.pem"], {}, "go together"),
        (["--tls-key", "k.pem"], {}, "go together"),
        (["--tls-client-ca", "ca.pem"], {}, "needs --tls-cert"),
        ([], {"FLOE_REQUIRE_SASL": "perhaps"}, "FLOE_REQUIRE_SASL"),
    ],
)
def test_inconsistent_security_settings_are_refused(argv, environ, message):
    with pytest.raises(ConfigError, match=message):
        parse_config([*BASE, *argv], environ)


def test_an_unreadable_certificate_stops_the_agent_with_one_line(tmp_path):
    missing = str(tmp_path / "missing.pem")
    done = subprocess.run(
        [sys.executable, "-m", "agents", *BASE, "--kafka-port", "0", "--http-port", "0", "--schema-registry-port", "0",
         "--tls-cert", missing, "--tls-key", missing],
        cwd=REPO, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("floe-agent: cannot load --tls-cert")
