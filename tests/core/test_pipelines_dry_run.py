"""A dry run: a configuration over sample records, as the console shows it."""

from core.pipelines import InRecord, dry_run

TEXT = """\
input: {kafka: {topics: [orders]}}
processors:
  - parse_json: {}
  - filter: 'value.amount > 0'
  - route: 'value.region == "eu" ? ["eu", "default"] : "default"'
outputs:
  default: {kafka: {topic: orders-all}}
  eu: {kafka: {topic: orders-eu}}
errors:
  dead_letter: {topic: orders-dlq}
"""


def test_a_dry_run_shows_each_record_s_fate():
    samples = [
        InRecord("orders", 0, 10, 1, b"k1", b'{"amount": 5, "region": "eu"}', (("h", b"v"),)),
        InRecord("orders", 0, 11, 2, None, b'{"amount": 0, "region": "us"}'),
        InRecord("orders", 1, 7, 3, b"\xff\x00", b"{oops"),
    ]
    result = dry_run(TEXT, samples)
    assert result["ok"] is True and result["problems"] == []
    eu, filtered, broken = result["records"]
    assert eu == {
        "source": {"topic": "orders", "partition": 0, "offset": 10},
        "outputs": [
            {
                "output": out,
                "key": "k1",
                "value": '{"amount":5,"region":"eu"}',
                "headers": [["h", "v"]],
            }
            for out in ("eu", "default")
        ],
        "filtered": False,
        "error": None,
    }
    assert filtered["filtered"] is True and filtered["outputs"] == []
    assert broken["filtered"] is False
    assert broken["error"]["processor"] == 0
    assert broken["error"]["message"].startswith("processors[0] (parse_json): the value is not")
    [dead] = broken["outputs"]
    assert dead["output"] == "$dead_letter"
    assert dead["key"] == {"base64": "/wA="}
    assert dead["value"] == "{oops"
    assert ["floe.source.offset", "7"] in dead["headers"]


def test_a_dry_run_of_a_bad_configuration_lists_its_problems():
    result = dry_run(TEXT.replace("value.amount > 0", "value.amount >"), [])
    assert result["ok"] is False and result["records"] == []
    [problem] = result["problems"]
    assert problem["line"] == 4 and problem["path"] == "processors[1].filter"
    assert set(problem) == {"line", "column", "path", "message"}
