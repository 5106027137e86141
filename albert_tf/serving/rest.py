"""TF Serving's REST rules, in process: answer a `:predict` body as the model server would, before deploying.

`ServingSession` answers TF Serving REST bodies (`{"instances": [...]}` row format or `{"inputs": {...}}` columnar)
the way the model server does: it loads the SavedModel with the session-based loader TF Serving uses, converts the
JSON values to the signature's dtypes strictly (an int32 input refuses 1.5), stacks row-format instances, runs the
signature and shapes the response (`predictions` / `outputs`). `predict.py --request_json` is its command line.
"""

import base64
import json

import numpy as np
import tensorflow as tf

from albert_tf.errors import AlbertError
from albert_tf.serving.batch_prediction import PredictError, to_json
from albert_tf.serving.loading import load_saved_model
from albert_tf.serving.savedmodel import refusal


class RestError(AlbertError):
    """A TF Serving REST body that the model server would refuse (HTTP 400); the message says why."""



def _json_values(value, dtype, where):
    """JSON (nested lists) -> numpy array of `dtype`, refusing values the model server refuses."""
    if dtype == tf.string:
        def convert(v):
            if isinstance(v, list):
                return [convert(x) for x in v]
            if isinstance(v, dict) and set(v) == {"b64"}:
                return base64.b64decode(v["b64"])
            if isinstance(v, str):
                return v.encode("utf-8")
            raise RestError(f"{where}: JSON value {json.dumps(v)} is not of the expected type string")
        return np.array(convert(value), dtype=object)

    np_dtype = dtype.as_numpy_dtype
    if dtype.is_integer:
        def check(v):
            if isinstance(v, list):
                for x in v:
                    check(x)
            elif isinstance(v, bool) or not isinstance(v, int):
                raise RestError(f"{where}: JSON value {json.dumps(v)} is not of the expected type "
                                f"{dtype.name}")
    elif dtype == tf.bool:
        def check(v):
            if isinstance(v, list):
                for x in v:
                    check(x)
            elif not isinstance(v, bool):
                raise RestError(f"{where}: JSON value {json.dumps(v)} is not of the expected type bool")
    else:
        def check(v):
            if isinstance(v, list):
                for x in v:
                    check(x)
            elif isinstance(v, bool) or not isinstance(v, (int, float)):
                raise RestError(f"{where}: JSON value {json.dumps(v)} is not of the expected type {dtype.name}")
    check(value)
    try:
        array = np.array(value)
    except ValueError:  # numpy refuses ragged nesting
        raise RestError(f"{where}: the nested lists are ragged (rows of different lengths)") from None
    if dtype.is_integer and array.size:
        info = np.iinfo(np_dtype)
        if array.min() < info.min or array.max() > info.max:
            raise RestError(f"{where}: a value is out of the range of {dtype.name}")
    return array.astype(np_dtype)


class ServingSession:
    """A SavedModel loaded as TF Serving loads it (`tf.compat.v1` session, `serve` tag), answering REST bodies.

    `predict(body)` takes the parsed JSON of a `:predict` request and returns the response TF Serving would send
    (`{"predictions": ...}` for `instances`, `{"outputs": ...}` for `inputs`); a body the server refuses raises
    RestError. `run(signature_name, feeds)` runs a signature on numpy feeds.
    """

    def __init__(self, export_dir, tags=("serve",)):
        self.graph = tf.Graph()
        self.session = tf.compat.v1.Session(graph=self.graph)
        with self.graph.as_default():
            meta_graph = load_saved_model(export_dir, PredictError, lambda path: tf.compat.v1.saved_model.loader.load(
                self.session, list(tags), path))
        self.signatures = {name: sig for name, sig in meta_graph.signature_def.items()
                           if not name.startswith("__")}

    def close(self):
        self.session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def signature(self, name=None):
        name = name or "serving_default"
        if name not in self.signatures:
            raise RestError(f"serving signature name: \"{name}\" not found in signature def; known: "
                            f"{', '.join(sorted(self.signatures))}")
        return self.signatures[name]

    def run(self, signature_name, feeds):
        """{output name: array} of a signature on {input name: numpy array} (shapes checked by the graph)."""
        signature = self.signature(signature_name)
        unknown = sorted(set(feeds) - set(signature.inputs))
        missing = sorted(set(signature.inputs) - set(feeds))
        if unknown or missing:
            raise RestError(f"signature {signature_name or 'serving_default'} takes "
                            f"{', '.join(sorted(signature.inputs))}"
                            f"; missing: {', '.join(missing) or 'none'}; unknown: {', '.join(unknown) or 'none'}")
        feed_dict = {}
        for name, value in sorted(feeds.items()):
            info = signature.inputs[name]
            tensor = self.graph.get_tensor_by_name(info.name)
            if not tensor.shape.is_compatible_with(np.shape(value)):
                raise RestError(f"input {name!r} has shape {list(np.shape(value))}; the signature takes "
                                f"{tensor.shape.as_list()} (None = any)")
            value = np.asarray(value)
            expected = tensor.dtype
            compatible = (value.dtype.kind in "SUO" if expected == tf.string else
                          value.dtype.kind in "iu" if expected.is_integer else
                          value.dtype.kind == "b" if expected == tf.bool else value.dtype.kind in "iuf")
            if not compatible:
                raise RestError(f"input {name!r} is {value.dtype}; the signature takes {expected.name}")
            feed_dict[tensor] = value
        fetches = {name: signature.outputs[name].name for name in sorted(signature.outputs)}
        try:
            return self.session.run(fetches, feed_dict)
        except tf.errors.InvalidArgumentError as err:  # the export's own checks: length, vocabulary
            raise RestError(refusal(err)) from None

    def predict(self, body):
        if isinstance(body, (str, bytes)):
            try:
                body = json.loads(body)
            except ValueError as err:
                raise RestError(f"the body is not JSON: {err}") from None
        if not isinstance(body, dict):
            raise RestError("the body must be a JSON object with \"instances\" or \"inputs\"")
        if ("instances" in body) == ("inputs" in body):
            raise RestError("the body must have exactly one of \"instances\" (row format) and \"inputs\" (columnar "
                            "format)")
        name = body.get("signature_name")
        signature = self.signature(name)
        dtypes = {k: tf.as_dtype(signature.inputs[k].dtype) for k in sorted(signature.inputs)}
        if "instances" in body:
            instances = body["instances"]
            if not isinstance(instances, list) or not instances:
                raise RestError("\"instances\" must be a non-empty list")
            if len(dtypes) == 1 and not all(isinstance(i, dict) for i in instances):
                only = next(iter(dtypes))
                instances = [{only: i} for i in instances]
            feeds = {}
            for key, dtype in dtypes.items():
                rows = []
                for index, instance in enumerate(instances):
                    if not isinstance(instance, dict) or key not in instance:
                        raise RestError(f"instance {index} lacks the named input {key!r} (each instance is an "
                                        f"object with {', '.join(sorted(dtypes))})")
                    rows.append(_json_values(instance[key], dtype, f"instances[{index}].{key}"))
                if len({r.shape for r in rows}) > 1:
                    raise RestError(f"input {key!r}: instances have different shapes "
                                    f"({sorted({r.shape for r in rows})}); row format needs equal shapes (pad them)")
                feeds[key] = np.stack(rows)
            for index, instance in enumerate(instances):
                extra = sorted(set(instance) - set(dtypes))
                if extra:
                    raise RestError(f"instance {index} has input(s) the signature does not take: {', '.join(extra)}")
            outputs = self.run(name, feeds)
            batch = len(instances)
            for key, value in outputs.items():
                if np.ndim(value) == 0 or np.shape(value)[0] != batch:
                    raise RestError(f"output {key!r} has no batch dimension; use the columnar format (\"inputs\")")
            if len(outputs) == 1:
                only = next(iter(outputs.values()))
                return {"predictions": [to_json(only[i]) for i in range(batch)]}
            return {"predictions": [{k: to_json(v[i]) for k, v in outputs.items()} for i in range(batch)]}
        inputs = body["inputs"]
        if not isinstance(inputs, dict) or (len(dtypes) == 1 and next(iter(dtypes)) not in inputs):
            if len(dtypes) != 1:
                raise RestError(f"\"inputs\" must be an object with {', '.join(sorted(dtypes))}")
            inputs = {next(iter(dtypes)): inputs}
        extra = sorted(set(inputs) - set(dtypes))
        if extra:
            raise RestError(f"\"inputs\" has input(s) the signature does not take: {', '.join(extra)}")
        feeds = {key: _json_values(inputs[key], dtype, f"inputs.{key}") for key, dtype in dtypes.items()
                 if key in inputs}
        outputs = self.run(name, feeds)
        if len(outputs) == 1:
            return {"outputs": to_json(next(iter(outputs.values())))}
        return {"outputs": {k: to_json(v) for k, v in outputs.items()}}
