"""``floe_commit_files`` tells a resend of what was written from a gap (issue 40).

An idempotent producer's batch whose sequence is neither the next one nor among the
producer's last five batches was refused with OUT_OF_ORDER_SEQUENCE_NUMBER (45), as
Kafka's leader does — whether its sequences are *behind* the stored last sequence (a
resend of a batch written more than five batches ago: nothing is missing) or *ahead* of
it (a gap: an earlier batch is missing). An agent sequencing its journal must tell the
two apart: a producer whose partition moved between agents during a control-plane
outage can have the same batch acknowledged in both agents' journals (it resent it),
and the copy sequenced second is behind; one ahead waits for its predecessor
(agents/write_path.py). A batch behind, in the same epoch, is now refused with
DUPLICATE_SEQUENCE_NUMBER (46); nothing is stored either way. The agent answers a
producer 45 for both, as before (KIP-98's code for a sequence not in the cache).
"""

import importlib

from django.db import migrations

_0014 = importlib.import_module("metadata_store.migrations.0014_tail_feed")

OLD = _0014.NEW

BEHIND = """                        ELSIF ((st_seq[s]::bigint - (p_seq[i]::bigint + p_count[i] - 1))
                                  % 2147483648 + 2147483648) % 2147483648 < 1073741824 THEN
                            -- Its last sequence is at or before the stored last one (in
                            -- the same epoch): written before, older than the last five
                            -- batches. DUPLICATE_SEQUENCE_NUMBER, nothing stored (0024).
                            codes[i] := 46;
                        ELSE
                            codes[i] := 45;
                        END IF;
                        CONTINUE;"""

GAP = """                        ELSE
                            codes[i] := 45;
                        END IF;
                        CONTINUE;"""


def _edit(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise RuntimeError(f"migration 0024: {old!r} is not in floe_commit_files once")
    return text.replace(old, new)


NEW = _edit(OLD, GAP, BEHIND)


class Migration(migrations.Migration):
    dependencies = [("metadata_store", "0023_agent_key_group")]

    operations = [migrations.RunSQL(NEW, reverse_sql=OLD)]
