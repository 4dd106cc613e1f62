"""`.proto` text to a FileDescriptorProto with protoc itself: grpcio-tools ships a build
of it (`python -m grpc_tools.protoc`) and Google's well-known types (`google/protobuf/
*.proto`), so a schema is read exactly as the Protobuf compiler reads it, with its
errors. protoc runs in a child process (its errors go to its standard error, which this
process could not take from a thread), bounded in time; a schema is compiled once per
agent (parsed schemas are cached by fingerprint)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc_tools
from google.protobuf import descriptor_pb2

# The file a schema is compiled as: a name no reference can take (references are named
# as their `import` lines say, and this one has a character no import path has).
SCHEMA_FILE = "floe registered schema.proto"
TIMEOUT_S = 20.0
_WELL_KNOWN = str(Path(grpc_tools.__file__).parent / "_proto")


class ProtoError(ValueError):
    """protoc refused the text: its message names the line and column."""


def compile_proto(
    text: str, imports: list[descriptor_pb2.FileDescriptorProto]
) -> descriptor_pb2.FileDescriptorProto:
    """The FileDescriptorProto of `.proto` text whose `import`s are among `imports`
    (each named as it is imported) or Google's well-known types."""
    with tempfile.TemporaryDirectory(prefix="floe-protoc-") as tmp:
        folder = Path(tmp)
        (folder / SCHEMA_FILE).write_text(text, encoding="utf-8")
        argv = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"--proto_path={folder}",
            f"--proto_path={_WELL_KNOWN}",
            f"--descriptor_set_out={folder / 'out.pb'}",
        ]
        if imports:
            given = descriptor_pb2.FileDescriptorSet(file=imports)
            (folder / "imports.pb").write_bytes(given.SerializeToString())
            argv.append(f"--descriptor_set_in={folder / 'imports.pb'}")
        try:
            done = subprocess.run(
                [*argv, SCHEMA_FILE],
                cwd=folder,
                capture_output=True,
                timeout=TIMEOUT_S,
                env={**os.environ, "PYTHONWARNINGS": "ignore"},
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ProtoError(f"protoc took over {TIMEOUT_S:g} s") from None
        if done.returncode != 0:
            message = done.stderr.decode(errors="replace").strip()
            message = message.replace(f"{folder}/", "").replace(f"{SCHEMA_FILE}:", "line ")
            raise ProtoError(message or f"protoc failed ({done.returncode})")
        compiled = descriptor_pb2.FileDescriptorSet.FromString((folder / "out.pb").read_bytes())
    return compiled.file[-1]
