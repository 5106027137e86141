"""TF Serving's REST rules (albert_tf/serving/rest.py) on a small SavedModel made here: JSON values of each type
and what the model server refuses, the row and columnar formats and their answers, and every refusal in one line.
On the real exports: tests/serving/test_export.py (slow)."""

import base64
import json

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.serving import rest
from albert_tf.serving.rest import RestError, ServingSession


@pytest.fixture(name="session", scope="module")
def _session(tmp_path_factory):
    module = tf.Module()

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name="ids"),
                                  tf.TensorSpec([None], tf.string, name="text")])
    def two(ids, text):
        return {"total": tf.reduce_sum(ids, axis=1), "length": tf.strings.length(text)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def one(x):
        return {"doubled": 2.0 * x}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def scalar(x):
        return {"sum": tf.reduce_sum(x), "same": x}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    def fixed(x):
        return {"fixed": tf.constant([1.0, 2.0, 3.0]), "same": x}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.bool, name="on")])
    def flag(on):
        return {"number": tf.cast(on, tf.int32), "rows": tf.stack([tf.cast(on, tf.int32)] * 3, axis=1)}

    module.two, module.one, module.scalar, module.fixed, module.flag = two, one, scalar, fixed, flag
    export_dir = str(tmp_path_factory.mktemp("rest") / "model")
    tf.saved_model.save(module, export_dir, signatures={"serving_default": two, "one": one, "scalar": scalar,
                                                        "fixed": fixed, "flag": flag})
    with ServingSession(export_dir) as session:
        yield session


def test_json_values_of_each_type():
    values = rest._json_values  # pylint: disable=protected-access
    strings = values(["a", {"b64": base64.b64encode(b"\xff\x00").decode()}, "é"], tf.string, "w")
    assert strings.tolist() == [b"a", b"\xff\x00", "é".encode()]
    assert values([[1, 2], [3, 4]], tf.int32, "w").dtype == np.int32
    np.testing.assert_array_equal(values([1.5, 2], tf.float32, "w"), np.array([1.5, 2.0], np.float32))
    assert values([True, False], tf.bool, "w").tolist() == [True, False]
    assert values([], tf.int32, "w").shape == (0,)
    assert values([-2 ** 31, 2 ** 31 - 1], tf.int32, "w").tolist() == [-2 ** 31, 2 ** 31 - 1]  # the range's ends
    for value, dtype, told in ((1, tf.string, r"w: JSON value 1 is not of the expected type string"),
                               ([{"x": "YQ=="}], tf.string, r'w: JSON value {"x": "YQ=="} is not of the expected '
                                                            r"type string"),
                               ([True], tf.int32, r"w: JSON value true is not of the expected type int32"),
                               ([2.5], tf.int64, r"w: JSON value 2.5 is not of the expected type int64"),
                               ([1], tf.bool, r"w: JSON value 1 is not of the expected type bool"),
                               (["1"], tf.float32, r'w: JSON value "1" is not of the expected type float'),
                               ([False], tf.float32, r"w: JSON value false is not of the expected type float"),
                               ([[1, 2], [3]], tf.int32, r"w: the nested lists are ragged"),
                               ([2 ** 31], tf.int32, r"w: a value is out of the range of int32"),
                               ([-2 ** 31 - 1], tf.int32, r"w: a value is out of the range of int32")):
        with pytest.raises(RestError, match=f"^{told}"):
            values(value, dtype, "w")


def test_row_and_columnar_bodies_get_tf_servings_answers(session):
    rows = {"instances": [{"ids": [1, 2, 3], "text": "ab"}, {"ids": [4, 5, 6], "text": "é"}]}
    assert session.predict(rows) == {"predictions": [{"length": 2, "total": 6}, {"length": 2, "total": 15}]}
    assert session.predict(json.dumps(rows).encode()) == session.predict(rows)
    columns = {"inputs": {"ids": [[1, 2], [3, 4]], "text": ["abc", ""]}}
    assert session.predict(columns) == {"outputs": {"length": [3, 0], "total": [3, 7]}}
    # one input, one output: bare values in either format
    assert session.predict({"signature_name": "one", "instances": [1.0, 2.5]}) == {"predictions": [2.0, 5.0]}
    assert session.predict({"signature_name": "one", "inputs": [1.0, 2.5]}) == {"outputs": [2.0, 5.0]}
    assert session.predict({"signature_name": "one", "inputs": {"x": [3.0]}}) == {"outputs": [6.0]}
    assert session.predict({"signature_name": "scalar", "inputs": {"x": [1.0, 2.0]}}) == \
        {"outputs": {"same": [1.0, 2.0], "sum": 3.0}}


@pytest.mark.parametrize("body, told", [
    ("{not json", r"^the body is not JSON: "),
    ([1, 2], r'^the body must be a JSON object with "instances" or "inputs"$'),
    ({"instances": [1], "inputs": {}}, r'^the body must have exactly one of "instances" \(row format\) and '),
    ({}, r"^the body must have exactly one of"),
    ({"signature_name": "nope", "inputs": {}}, r'^serving signature name: "nope" not found in signature def; '
                                               r"known: fixed, flag, one, scalar, serving_default$"),
    ({"instances": []}, r'^"instances" must be a non-empty list$'),
    ({"instances": [{"ids": [1]}]}, r"^instance 0 lacks the named input 'text' \(each instance is an object with "
                                    r"ids, text\)$"),
    ({"instances": [{"ids": [1], "text": "a"}, {"ids": [1, 2], "text": "b"}]},
     r"^input 'ids': instances have different shapes \(\[\(1,\), \(2,\)\]\); row format needs equal shapes"),
    ({"instances": [{"ids": [1], "text": "a", "extra": 1}]},
     r"^instance 0 has input\(s\) the signature does not take: extra$"),
    ({"instances": [{"ids": [1.5], "text": "a"}]}, r"^instances\[0\].ids: JSON value 1.5 is not of the expected "),
    ({"inputs": [[1]]}, r'^"inputs" must be an object with ids, text$'),
    ({"instances": [[1, 2]]}, r"^instance 0 lacks the named input 'ids' \(each instance is an object with "),
    ({"signature_name": "one", "inputs": {"y": [1.0]}},
     r'^inputs.x: JSON value {"y": \[1.0\]} is not of the expected type float32$'),
    ({"inputs": {"ids": [[1]], "text": ["a"], "more": 1}}, r'^"inputs" has input\(s\) the signature does not take: '
                                                           r"more$"),
    ({"inputs": {"ids": [[1]]}}, r"^signature serving_default takes ids, text; missing: text; unknown: none$"),
    ({"inputs": {"ids": [1], "text": ["a"]}}, r"^input 'ids' has shape \[1\]; the signature takes \[None, None\] "),
    ({"signature_name": "scalar", "instances": [1.0, 2.0]},
     r"^output 'sum' has no batch dimension; use the columnar format"),
    ({"signature_name": "fixed", "instances": [1.0, 2.0]},
     r"^output 'fixed' has no batch dimension; use the columnar format"),
    ({"signature_name": "one", "instances": [1.0, {"x": 2.0}]},
     r'^instances\[1\].x: JSON value {"x": 2.0} is not of the expected type float32$'),
])
def test_what_the_model_server_refuses_is_one_line(session, body, told):
    with pytest.raises(RestError, match=told):
        session.predict(body)


def test_run_checks_each_feeds_type(session):
    with pytest.raises(RestError, match=r"^input 'ids' is float64; the signature takes int32$"):
        session.run(None, {"ids": np.ones((1, 2)), "text": np.array([b"a"], object)})
    with pytest.raises(RestError, match=r"^input 'text' is int64; the signature takes string$"):
        session.run(None, {"ids": np.ones((1, 2), np.int32), "text": np.array([1])})
    outputs = session.run(None, {"ids": np.ones((1, 2), np.int32), "text": np.array([b"ab"], object)})
    assert outputs["total"].tolist() == [2] and outputs["length"].tolist() == [2]
    assert session.run("one", {"x": [1.0, 2.0]})["doubled"].tolist() == [2.0, 4.0]  # plain lists too
    assert session.run("flag", {"on": np.array([True, False])})["number"].tolist() == [1, 0]
    with pytest.raises(RestError, match=r"^input 'on' is int64; the signature takes bool$"):
        session.run("flag", {"on": np.array([1, 0])})


def test_rows_of_an_output_with_more_axes_are_its_rows(session):
    assert session.predict({"signature_name": "flag", "instances": [True, False]}) == {
        "predictions": [{"number": 1, "rows": [1, 1, 1]}, {"number": 0, "rows": [0, 0, 0]}]}


def test_the_session_is_closed_by_close_and_by_leaving_its_block(tmp_path):
    module = tf.Module()
    module.f = tf.function(lambda x: {"y": x + 1.0}, input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    tf.saved_model.save(module, str(tmp_path / "m"), signatures={"serving_default": module.f})
    with ServingSession(str(tmp_path / "m")) as served:
        assert served.predict({"inputs": [1.0]}) == {"outputs": [2.0]}
    with pytest.raises(RuntimeError, match="closed Session"):
        served.predict({"inputs": [1.0]})
    served = ServingSession(str(tmp_path / "m"))
    served.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        served.predict({"inputs": [1.0]})


def test_a_missing_or_damaged_export_is_one_line(tmp_path):
    module = tf.Module()
    module.f = tf.function(lambda x: {"y": x + 1.0}, input_signature=[tf.TensorSpec([None], tf.float32, name="x")])
    tf.saved_model.save(module, str(tmp_path / "m"), signatures={"serving_default": module.f})
    with pytest.raises(rest.PredictError, match=rf"^no SavedModel in {tmp_path / 'absent'}$"):
        ServingSession(str(tmp_path / "absent"))
    graph = tmp_path / "m" / "saved_model.pb"
    graph.write_bytes(graph.read_bytes()[:50])
    with pytest.raises(rest.PredictError, match=rf"^the SavedModel in {tmp_path / 'm'} cannot be loaded \(truncated "
                                                r"or damaged\?\): "):
        ServingSession(str(tmp_path / "m"))
