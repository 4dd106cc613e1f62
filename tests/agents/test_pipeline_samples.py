"""The agent's end of a pipeline's dry run (browse-channel kind ``pipeline_dry_run``):
a request that does not say what to run on is answered with an error, never read.
(The whole road, through a live agent: tests/virtualclusters/pipelines.)"""

from __future__ import annotations

import asyncio

import pytest

from agents.browse_channel import BrowseChannel
from agents.pipeline_samples import dry_run_answer


@pytest.mark.parametrize(
    "request_body",
    [
        {},
        {"config": "x", "topics": "orders", "limit": 5},
        {"config": "x", "topics": [], "limit": 5},
        {"config": "x", "topics": ["t"] * 17, "limit": 5},
        {"config": "x", "topics": ["orders"], "limit": 0},
        {"config": "x", "topics": ["orders"], "limit": 101},
        {"config": 7, "topics": ["orders"], "limit": 5},
    ],
)
def test_a_bad_dry_run_request_is_answered_with_an_error(request_body):
    with pytest.raises(ValueError, match="bad pipeline_dry_run request"):
        asyncio.run(dry_run_answer(None, request_body))

    async def run(request):
        return await dry_run_answer(None, request)

    channel = BrowseChannel(None, agent_id="a", browse=None, pipeline_dry_run=run)
    answer = asyncio.run(channel._read({"kind": "pipeline_dry_run", **request_body}))
    assert answer["error"].startswith("ValueError: bad pipeline_dry_run request")


def test_an_agent_without_the_dry_run_says_so():
    channel = BrowseChannel(None, agent_id="a", browse=None)
    answer = asyncio.run(channel._read({"kind": "pipeline_dry_run"}))
    assert answer == {"error": "this agent reads no 'pipeline_dry_run'"}
