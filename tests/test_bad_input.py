"""Bad command lines, as a user types them: exit code 2, one ``error:`` line per problem naming the
key and the value, no traceback, and no TensorFlow or MLflow import (so the answer comes in about
half a second).

Each command runs in a process of its own that never imported TensorFlow, Keras or MLflow: a fork of
one warm Python process (``SERVER`` below) that has loaded what every entry point loads first
(Hydra, OmegaConf, ``zoo.config``) and checked one good command line of ``train.py`` and one of
``evaluate.py`` (what a process does once: Hydra finds its plugins and builds its override grammar,
the catalog reads the configs), so the table of about a hundred command lines costs seconds, not
the minutes a hundred interpreter starts take on a shared 2-core machine. The start a user pays is
measured too: each entry point's first command line also runs as ``python <script> <args>`` in a new
interpreter, and the 3 s limit holds for that start (its CPU time less the same command's time in a
fork, so the once-per-process work is in it) plus each command line's own CPU time in its fork. Wall
times grow with whatever else runs on the machine; CPU times are what the limit holds (both are
printed)."""

import os
import resource
import subprocess
import sys
import time
import zipfile

import pytest

from conftest import ROOT, empty_store

# Runs an entry point as ``python <script> <args>`` would, with an import hook that makes importing
# TensorFlow, Keras or MLflow fail: a bad command line must be answered before any of them starts.
GUARD = """
import importlib.abc, os, runpy, sys
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "keras", "mlflow"):
            raise ImportError(f"{name} imported while checking a command line")
sys.meta_path.insert(0, Refuse())

def heavy():
    return sorted({m.split(".")[0] for m in sys.modules} & {"tensorflow", "keras", "mlflow"})

def run(argv):
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(sys.argv[0]))  # as `python <script>` does
    if sys.argv[0].endswith(".py"):
        runpy.run_path(sys.argv[0], run_name="__main__")
    else:  # python -m zoo.compare
        runpy.run_module(os.path.basename(sys.argv[0]), run_name="__main__", alter_sys=True)
"""

# A new interpreter per command line: what a user starts.
RUNNER = GUARD + """
import atexit
atexit.register(lambda: print("heavy modules at exit:", heavy()))
run(sys.argv[1:])
"""

# One warm interpreter that forks a child per command line read from stdin (one JSON object a line:
# argv, env, cwd and the files for the child's stdout and stderr) and answers with the child's exit
# code and CPU seconds (os.wait4). It loads what train.py and evaluate.py load before they check, and
# checks a good command line of each once (the module docstring says why); then gc.freeze() keeps the
# children's garbage collector off the parent's objects (their pages stay shared, not copied).
SERVER = GUARD + """
import gc, json
import hydra, omegaconf  # noqa: F401
import zoo.config, zoo.tracking.command_line  # noqa: F401
zoo.config.problems([])
zoo.config.problems([], "evaluate")
assert not heavy(), heavy()
gc.collect()
gc.freeze()
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.chdir(job["cwd"])
            os.environ.clear()
            os.environ.update(job["env"])
            for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
            run(job["argv"])
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if not isinstance(stop.code, (int, type(None))):
                print(stop.code, file=sys.stderr)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        print("heavy modules at exit:", heavy())
        sys.stdout.flush(), sys.stderr.flush()
        os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    print(json.dumps({"code": os.waitstatus_to_exitcode(status), "cpu": usage.ru_utime + usage.ru_stime}),
          flush=True)
"""

LIMIT_SECONDS = 3.0
TIMES = {}

TRAIN = [  # (arguments, strings the output must hold: the key and the value)
    (["model=transformer", "model.embed_dim=100", "model.num_heads=3"], ["model.embed_dim=100", "num_heads=3", "99"]),
    (["model.cell=gruu"], ["model.cell='gruu'", "'lstm'", "model.cell=gru"]),
    (["data.train_size=-5"], ["data.train_size=-5", ">= 1"]),
    (["data=reverse", "data.min_length=9", "data.max_length=3"], ["data.min_length=9", "max_length=3"]),
    (["data=reverse", "data.test_min_length=90", "data.test_max_length=60"], ["data.test_min_length=90",
                                                                            "empty test length range 90-60"]),
    (["model=aoa_reader", "data=story_qa", "data.max_sentences=60"], ["data.max_sentences=60", "at most 50"]),
    (["model=transformer", "model.activation=swish"], ["model.activation='swish'", "'gelu'"]),
    (["model=memory_network", "data=story_qa", "model.encoding=pos"], ["model.encoding='pos'", "model.encoding=position"]),
    (["model=show_attend_tell", "data=digit_strings", "model.attention_mode=sharp"],
     ["model.attention_mode='sharp'", "'soft', 'hard'", "model.attention_mode=hard"]),
    (["model=recurrent_attention", "data=digit_strings", "model.location_std=0"],
     ["model.location_std=0", "a number > 0", "default: 0.1"]),
    (["data=tatoeba", "data.path=/nonexistent.zip"], ["data.path=/nonexistent.zip", "does not exist"]),
    (["model=transformer_classifier", "data=listops", "data.path=/nonexistent/listops"],
     ["data.path=/nonexistent/listops", "does not exist", "basic_train.tsv"]),
    (["model=transformer_classifier", "data=listops", "data.min_length=600"], ["data.min_length=600",
                                                                               "max_length=500"]),
    (["model=nope"], ["model", "'nope'", "Available: aoa_reader, bahdanau,"]),
    (["model=nadaraya_watson", "data=kernel_regression", "debug=smoke"],
     ["model.embed_dim=8", "model=nadaraya_watson has no key embed_dim", "Its keys: kernel, bandwidth"]),
    (["trainer.epochs=abc"], ["trainer.epochs='abc'", "an integer", "default: 20"]),
    (["trainer.epochs=0"], ["trainer.epochs=0", "positive integer", "default: 20"]),
    (["trainer.batch_size=-5"], ["trainer.batch_size=-5", "positive integer"]),
    (["trainer.epochz=3"], ["trainer.epochz", "Keys in trainer: epochs"]),
    (["model.hidden_size=0"], ["model.hidden_size=0", "default: 128"]),
    (["model=luong", "model.hidden_size=7"], ["model.hidden_size=7", "even", "bidirectional=True"]),
    (["model=transformer", "model.embed_dim=6", "model.num_heads=2"], ["model.embed_dim=6", "rotary"]),
    (["model.dropout=1.5"], ["model.dropout=1.5", "[0, 1)"]),
    (["optimizer.learning_rate=-1"], ["optimizer.learning_rate=-1", "positive number", "default: 0.003"]),
    (["optimizer.name=rmsprop"], ["optimizer.name=rmsprop", "Available: adam, adamw, sgd"]),
    (["optimizer.decay=cosine"], ["optimizer.decay=cosine", "inverse_sqrt"]),
    (["tracking.register_as=zoo-dates", "tracking.export=false"], ["tracking.register_as=zoo-dates",
                                                                   "tracking.export=false"]),
    (["decoding.strategy=topk"], ["decoding.strategy=topk", "greedy, beam, sample"]),
    (["decoding=beam", "decoding.beam_size=0"], ["decoding.beam_size=0", "integer >= 1"]),
    (["decoding=sample", "decoding.top_p=1.5"], ["decoding.top_p=1.5", "(0, 1]"]),
    (["decoding=sample", "decoding.temperature=0"], ["decoding.temperature=0", "> 0"]),
    (["decoding.top_p=0.5"], ["decoding.top_p=0.5", "does nothing with decoding.strategy=greedy"]),
    (["decoding.max_length=0"], ["decoding.max_length=0", "positive integer"]),
    (["trainer.label_smoothing=1.0"], ["trainer.label_smoothing=1.0", "[0, 1)"]),
    (["trainer.strategy=horovod"], ["trainer.strategy=horovod", "mirrored"]),
    (["trainer.precision=float8"], ["trainer.precision=float8", "mixed_bfloat16"]),
    (["trainer.device=tpu"], ["trainer.device=tpu", "auto, cpu, gpu"]),
    (["trainer.keep_checkpoints=0", "trainer.intra_op_threads=0"],
     ["trainer.keep_checkpoints=0", ">= 1", "trainer.intra_op_threads=0", "positive integer or null (default: null)"]),
    (["model.attention=nope"], ["model.attention=nope", "Available: additive"]),
    (["model=transformer", "model.attention=dot"], ["model.attention=dot", "not a self-attention", "multi_head"]),
    (["model=transformer", "model.attention=linformer"], ["model.attention=linformer", "cannot be causal"]),
    (["model=transformer", "model.attention_options.num_heads=8"], ["model.attention_options.num_heads=8",
                                                                    "use model.num_heads"]),
    (["model=transformer", "model.num_kv_heads=3"], ["model.num_heads=4", "num_kv_heads=3", "model.num_kv_heads=2"]),
    (["model=transformer", "model.attention_window=0"], ["model.attention_window=0", "positive integer"]),
    (["model=transformer", "model.positions=rope"], ["model.positions='rope'", "'alibi'", "default: 'rotary'"]),
    (["model.attention=self_attentive"], ["model.attention=self_attentive", "alignment"]),
    (["data.tokenizer=bpe"], ["data.tokenizer=bpe", "wordpiece"]),
    (["model=nadaraya_watson"], ["model=nadaraya_watson", "regression"]),
    (["seed=x"], ["seed='x'", "an integer"]),
    (["data=tatoeba", "data.max_len=0", "data.min_freq=0"], ["data.max_len=0", "data.min_freq=0"]),
    (["data=tatoeba", "data.pair=xyz-eng"], ["corpus 'xyz-eng' was not found", "$ZOO_DATA_DIR", "data.download=true"]),
    (["data=spoken_digits", "data.cache_dir={data_dir}"], ["Free Spoken Digit Dataset was not found",
                                                          "$ZOO_DATA_DIR (not set)", "data.path=<path to fsdd.zip>"]),
    (["data=digit_strings", "data.width=100"], ["data.width=100 and data.height=32 cannot hold 8 digits",
                                                "data.width=156"]),
    # An unprojected score (h_t^T h_s) where the model's query and memory differ in width:
    (["model=bahdanau", "model.attention=dot"], ["model.attention=dot scores h_t^T h_s", "is 128 wide and its memory "
                                                 "256 (the bidirectional encoder's 2 x 128)", "model.bidirectional=false"]),
    (["model=show_attend_tell", "data=digit_strings", "model.attention=local_p", "model.attention_options.scoring=scaled_dot"],
     ["model.attention=local_p with model.attention_options.scoring=scaled_dot", "memory 64", "model.hidden_size=64"]),
    (["model=vision_transformer", "data=digit_strings", "model.patch_size=6"],
     ["model.patch_size=6 does not tile the 32x160 canvas", "e.g. model.patch_size=8"]),
    (["model=transformer", "model.max_length=64"], ["model.max_length=64", "positions=learned"]),
    # What a task kind cannot train with (TRAINER_CONSTRAINTS of zoo/training/<task>.py), before TensorFlow:
    (["model=aoa_reader", "data=story_qa", "trainer.strategy=mirrored"],
     ["trainer.strategy=mirrored does not work with model=aoa_reader (task: qa)", "not split over replicas",
      "Use trainer.strategy=default (the default)"]),
    (["model=transformer_classifier", "data=listops", "trainer.precision=mixed_bfloat16"],
     ["trainer.precision=mixed_bfloat16 does not work with model=transformer_classifier (task: classify)",
      "Use trainer.precision=float32 (the default)"]),
    (["model=show_attend_tell", "data=digit_strings", "trainer.precision=mixed_float16"],
     ["trainer.precision=mixed_float16 does not work with model=show_attend_tell (task: image)",
      "Use trainer.precision=float32"]),
    (["model=show_attend_tell", "data=digit_strings", "trainer.jit_compile=true"],
     ["trainer.jit_compile=true does not work with model=show_attend_tell (task: image)", "XLA cannot differentiate",
      "Use trainer.jit_compile=false (the default)"]),
    (["model=listen_attend_spell", "data=spoken_digits", "data.cache_dir={data_dir}", "model.cell=rnn",
      "trainer.jit_compile=true"],
     ["model.cell='rnn'", "'lstm'", "trainer.jit_compile=true does not work with model=listen_attend_spell "
      "(task: speech)", "XLA cannot differentiate", "Free Spoken Digit Dataset was not found"]),
    (["trainer.resume=0123456789abcdef"], ["trainer.resume=0123456789abcdef", "is not a run in"]),
    (["trainer.epochs=1"], ["http://127.0.0.1:9", "not reachable"], "server_down"),
    (["-m", "model=bahdanau,nope"], ["'nope'"]),
    # Answered from the corpus file's start and the configs, not after TensorFlow has started:
    (["data=tatoeba", "data.path={one_column}"], ["data.path={one_column}:", "Line 1 (no_tab)", "one column"]),
    (["data=tatoeba", "data.path={empty_corpus}"], ["data.path={empty_corpus}:", "the file is empty"]),
    (["data=tatoeba", "data.path={truncated_zip}"], ["data.path={truncated_zip}:", "is not a zip archive",
                                                     "download complete"]),
    (["data=tatoeba", "data.pair=fra-eng"], ["data.pair=fra-eng:", "fra-eng.zip is not a zip archive"], "data_dir"),
    (["decoding=beam", "decoding.beam_size=50"], ["decoding.beam_size=50", "at most 12 tokens", "0-9 and '-'",
                                                   "decoding.beam_size<=12"]),
    (["data=reverse", "data.alphabet=ab", "decoding.beam_size=4"], ["decoding.beam_size=4", "data.alphabet has 2",
                                                                    "decoding.beam_size<=3"]),
    (["data=tatoeba", "data.path={good_corpus}", "data.max_size=8", "decoding.beam_size=6"],
     ["decoding.beam_size=6", "data.max_size=8", "decoding.beam_size<=5"]),
    (["model=luong", "model.attention=local_p", "+model.attention_options.window_size=0"],
     ["model.attention_options.window_size=0", "an integer >= 1", "2D + 1", "(default: 10)"]),
    (["model=bahdanau", "model.attention=local_m", "model.attention_options.window_size=-3"],
     ["model.attention_options.window_size=-3", "an integer >= 1"]),
    (["model=bahdanau", "model.attention=location_aware", "model.attention_options.kernel_size=0"],
     ["model.attention_options.kernel_size=0", "an integer >= 1", "r, the width of each filter", "(default: 15)"]),
    (["model=luong", "model.attention_options.normalizer=foo"],
     ["model.attention_options.normalizer='foo'", "one of 'softmax', 'sparsemax', 'entmax15'",
      "(default: 'softmax')"]),
    (["trainer.epochs=0", "model.embed_dim=0", "trainer.epochz=1", "optimizer.name=rmsprop"],
     ["trainer.epochs=0", "model.embed_dim=0", "trainer.epochz", "optimizer.name=rmsprop"]),
]

EVALUATE = [
    ([], ["run_id=", "saved_model=", "model_uri=", "Received: none"]),
    (["run_id=0123456789abcdef"], ["run_id=0123456789abcdef", "is not a run in"]),
    (["run_id={bare_run}"], ["run_id={bare_run}", "has no saved_model/"]),
    (["saved_model={empty_dir}"], ["saved_model={empty_dir}", "not a SavedModel directory"]),
    (["saved_model=/nonexistent/saved_model"], ["saved_model=/nonexistent/saved_model", "does not exist"]),
    (["model_uri=runs:/0123456789abcdef/model"], ["model_uri=0123456789abcdef", "is not a run in"]),
    (["model_uri=runs:/{bare_run}/model"], ["model_uri=runs:/{bare_run}/model", "has no artifact 'model'"]),
    (["model_uri=models:/nomodel/1"], ["model_uri=models:/nomodel/1", "not a registered model version"]),
    (["model_uri=s3://bucket/model"], ["model_uri=s3://bucket/model", "runs:/<run id>/model"]),
    (["run_id={bare_run}", "split=dev"], ["split=dev", "train, val, test"]),
    (["run_id={bare_run}", "batch_size=0"], ["batch_size=0", "positive integer"]),
    (["run_id={bare_run}", "intra_op_threads=0", "onednn=yes"],
     ["intra_op_threads=0", "positive integer or null", "onednn='yes'", "true or false or null"]),
    (["run_id={bare_run}", "compare_to=fedcba9876543210"], ["compare_to=fedcba9876543210", "is not a run in"]),
    (["run_id={bare_run}", "decoding.top_p=0"], ["decoding.top_p=0", "(0, 1]"]),
    (["run_id={bare_run}", "decoding.strategy=nope"], ["decoding.strategy=nope", "greedy, beam, sample"]),
    (["run_id={bare_run}", "data=nope"], ["data=nope", "Available: dates"]),
    (["run_id={bare_run}", "saved_model={empty_dir}"], ["exactly one of", "run_id=", "saved_model="]),
    (["run_id=x"], ["run_id=x", "no MLflow store"], "missing_store"),
]


TOOLS = [  # python -m <module> <arguments>
    ("zoo.bench", ["models=[foo,bahdanau]", "train.rounds=0", "sizes=[tiny,huge]", "inter_op_threads=0",
                   "onednn=maybe"],
     ["'foo'", "train.rounds=0", "'huge'", "inter_op_threads=0", "onednn='maybe'"]),
    ("zoo.bench", ["sizes=[small]", "size.small.data.pair=xyz-eng", "decode.fixed_rounds=0"],
     ["[small] needs its corpus", "'xyz-eng' was not found", "decode.fixed_rounds=0"]),
    ("zoo.bench", ["input_wait.overrides=['model=transformer','model.num_heads=3']"],
     ["input_wait.overrides", "model.embed_dim=64", "num_heads=3"]),
    ("zoo.bench", ["lengths=[0]"], ["lengths=[0] is not valid", "at least two different integers >= 1"]),
    ("zoo.bench", ["lengths=abc"], ["lengths='abc' is not valid", "lengths=[256,1024,4096,16384]"]),
    ("zoo.bench", ["lengths=[8,16]", "length_bench.attentions=[additive]", "length_bench.memory_limit_mb=0"],
     ["length_bench.attentions: 'additive'", "memory_efficient", "length_bench.memory_limit_mb=0"]),
    ("zoo.compare", ["--data", "nope"], ["--data=nope", "Available: dates"]),
    ("zoo.compare", ["--by-length", "--metric", "test_loss"], ["--metric=test_loss", "test_bleu"]),
    ("zoo.compare", ["--out", "figure.png"], ["--out=figure.png", "--by-length"]),
    ("zoo.compare", ["--explorer", "--by-length"], ["--explorer and --by-length are two comparisons"]),
    ("zoo.compare", ["--explorer", "--out", "nowhere/page.html"], ["--out=nowhere/page.html", "does not exist"]),
    ("zoo.compare", [], ["no MLflow store"], "missing_store"),
    ("zoo.compare", ["--paired", "{bare_run}", "0123456789abcdef"], ["--paired={bare_run}", "has no saved_model/",
                                                                    "--paired=0123456789abcdef", "is not a run in"]),
    ("zoo.compare", ["--runs", "0123456789abcdef"], ["--runs=0123456789abcdef", "is not a run in"]),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A real SQLite MLflow store holding one run without artifacts (as a run that failed before export)."""
    import mlflow

    root = tmp_path_factory.mktemp("bad_input")
    uri = empty_store(root)
    client = mlflow.MlflowClient(uri)
    experiment = client.create_experiment("attention-zoo", artifact_location=str(root / "artifacts"))
    run = client.create_run(experiment)
    client.set_terminated(run.info.run_id, "FAILED")
    empty = root / "not_a_saved_model"
    empty.mkdir()
    corpora = root / "corpora"  # bad corpus files, as a user's disk holds them (and $ZOO_DATA_DIR for data.pair)
    corpora.mkdir()
    lines = [f"I am tired {i}.\tJe suis fatigué {i}.\n" for i in range(400)]
    (corpora / "one_column.txt").write_text("".join(line.split("\t")[0] + "\n" for line in lines), encoding="utf-8")
    (corpora / "empty.txt").write_bytes(b"")
    (corpora / "good.txt").write_text("".join(lines), encoding="utf-8")
    with zipfile.ZipFile(corpora / "whole.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("fra.txt", "".join(lines) * 5)
    whole = (corpora / "whole.zip").read_bytes()
    (corpora / "fra-eng.zip").write_bytes(whole[: len(whole) // 2])  # an interrupted download
    return {"uri": uri, "bare_run": run.info.run_id, "empty_dir": str(empty), "root": root,
            "one_column": str(corpora / "one_column.txt"), "empty_corpus": str(corpora / "empty.txt"),
            "truncated_zip": str(corpora / "fra-eng.zip"), "good_corpus": str(corpora / "good.txt"),
            "data_dir": str(corpora)}


@pytest.fixture(scope="module")
def forks(store):
    """The warm interpreter of ``SERVER``: ``forks(argv, env, cwd)`` runs one command line in a fork of it
    and returns (exit code, stdout, stderr, CPU seconds of the fork, wall seconds)."""
    import json

    server = subprocess.Popen([sys.executable, "-c", SERVER], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", MLFLOW_TRACKING_URI=store["uri"]))
    outputs = store["root"] / "fork_outputs"
    outputs.mkdir(exist_ok=True)

    def run(argv, env, cwd):
        out, err = outputs / "stdout.txt", outputs / "stderr.txt"
        started = time.perf_counter()
        server.stdin.write(json.dumps({"argv": argv, "env": env, "cwd": str(cwd), "stdout": str(out),
                                       "stderr": str(err)}) + "\n")
        server.stdin.flush()
        answer = server.stdout.readline()
        assert answer, f"the fork server ended (exit code {server.poll()})"
        result = json.loads(answer)
        return (result["code"], out.read_text(), err.read_text(), result["cpu"],
                time.perf_counter() - started)

    yield run
    server.stdin.close()
    server.wait(timeout=30)


STARTS = {}  # entry point -> CPU seconds of starting it (a new interpreter's run less the fork's)


def run_entry_point(forks, script, args, uri, cwd, data_dir=None):
    """Runs ``python <script> <args>`` in a fork of the warm interpreter; the first command line of each
    entry point also in a new interpreter, which measures the entry point's start. Returns the exit
    code, stdout, stderr, the CPU seconds a user's new process would spend, and the wall seconds."""
    env = dict(os.environ, MLFLOW_TRACKING_URI=uri, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("ZOO_DATA_DIR", None)
    if data_dir:
        env["ZOO_DATA_DIR"] = data_dir
    code, out, err, cpu, wall = forks([str(ROOT / script), *args], env, cwd)
    if script not in STARTS:
        before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
        cold = subprocess.run([sys.executable, "-c", RUNNER, str(ROOT / script), *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=60)
        cold_wall, after = time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
        cold_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        assert (cold.returncode, cold.stderr) == (code, err), "a new interpreter answers as the fork does"
        STARTS[script] = max(0.0, cold_cpu - cpu)
        wall = max(wall, cold_wall)
    return code, out, err, STARTS[script] + cpu, wall


def check(script, args, expected, store, forks, flag=None, module=None):
    values = {k: v for k, v in store.items() if isinstance(v, str)}
    args = [a.format(**values) for a in args]
    expected = [e.format(**values) for e in expected]
    uri = {"missing_store": f"sqlite:///{store['root'] / 'absent.db'}",  # a store that is not there
           "server_down": "http://127.0.0.1:9"}.get(flag, store["uri"])  # a server that does not answer
    code, stdout, stderr, cpu, wall = run_entry_point(
        forks, module or script, args, uri, cwd=store["root"],
        data_dir=store["data_dir"] if flag == "data_dir" else None)
    TIMES[f"{script} {' '.join(args) or '(no arguments)'}"] = (wall, cpu)
    output = stdout + stderr
    assert code == 2, output
    assert "Traceback" not in output, output
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("error: ") for ln in lines), output
    for text in expected:
        assert text in stderr, f"{text!r} not in:\n{stderr}"
    assert "heavy modules at exit: []" in stdout, output  # the message came before TensorFlow, Keras, MLflow
    assert cpu < LIMIT_SECONDS, f"{cpu:.2f} s CPU ({wall:.2f} s wall) for {script} {' '.join(args)}"


@pytest.mark.parametrize("case", TRAIN, ids=[" ".join(c[0]) for c in TRAIN])
def test_train_py_rejects(case, store, forks):
    args, expected, *flags = case
    check("train.py", args, expected, store, forks, *flags)


@pytest.mark.parametrize("case", EVALUATE, ids=[" ".join(c[0]) or "(none)" for c in EVALUATE])
def test_evaluate_py_rejects(case, store, forks):
    args, expected, *flags = case
    check("evaluate.py", args, expected, store, forks, *flags)


@pytest.mark.parametrize("case", TOOLS, ids=[f"{c[0]} {' '.join(c[1])}" for c in TOOLS])
def test_tools_reject(case, store, forks):
    module, args, expected, *flags = case
    check(f"-m {module}", args, expected, store, forks, *flags, module=module)


def test_the_table_is_large_and_the_slowest_is_reported():
    """Runs last in this file: at least 30 command lines were checked; prints the slowest."""
    assert len(TRAIN) + len(EVALUATE) + len(TOOLS) >= 30
    if TIMES:
        slowest = sorted(TIMES.items(), key=lambda kv: -kv[1][1])[:5]
        print(f"\nslowest bad command lines of {len(TIMES)} (CPU s of the process tree, wall s):")
        for command, (wall, cpu) in slowest:
            print(f"  {cpu:5.2f}  {wall:5.2f}  {command}")
        print(f"  slowest wall time: {max(w for w, _ in TIMES.values()):.2f} s")
