"""What the four tasks share: defaults of the runner's Task methods, the tokenizer, and naming a bad record file."""

from albert_tf.data import records
from albert_tf.errors import DataError, UsageError
from albert_tf.text.tokenization import FullTokenizer


def check_vocab_size(tokenizer, path, config):
    """Refuses a tokenizer whose ids do not all fit the embedding table of `config` (before any training)."""
    size = max(tokenizer.vocab.values()) + 1
    if size > config.vocab_size:
        raise UsageError(f"{path} has {size} tokens but the albert config's vocab_size is {config.vocab_size}: its "
                         "ids would not fit the embedding table (for the Chinese vocab_chinese.txt use a config "
                         "with vocab_size 21128)")


class TaskBase:
    """Defaults of the `albert_tf.train.runner.Task` methods; each task overrides what differs."""

    name = "task"
    #: the flag that names the training data, for error messages
    train_data_flag = "--train_file"

    def primary_metric(self, params):
        return None

    def compile_args(self, params):
        return {}

    def prepare(self, params, strategy, cache_dir):
        pass

    def has_dev(self, params):
        return False

    def predict(self, model, params, strategy, output_dir):
        return {}

    def train_files(self, params):
        """The record files training reads (to name a corrupted one)."""
        return []

    def eval_files(self, params):
        """The record files evaluation reads, and the flag naming them (to name a corrupted one)."""
        return [], "--eval_file"

    def data_error(self, params, error, evaluating=False):
        files, flag = self.eval_files(params) if evaluating else (self.train_files(params), self.train_data_flag)
        path, reason = records.unreadable_file(files)
        if path:
            return DataError(f"{flag}: {path} is truncated or corrupted ({reason})")
        return DataError(f"{flag}: a record could not be read: {error.message.splitlines()[0]}")

    @staticmethod
    def tokenizer(params):
        """`FullTokenizer` from `--spm_model_file` (or `--vocab_file`, WordPiece), checked to fit the embedding
        table of the albert config."""
        tokenizer = FullTokenizer(vocab_file=None if params.spm_model_file else params.vocab_file,
                                  do_lower_case=params.do_lower_case, spm_model_file=params.spm_model_file)
        check_vocab_size(tokenizer, params.spm_model_file or params.vocab_file, params.albert_config)
        return tokenizer

    @staticmethod
    def check_batch_sizes(params, strategy, names):
        replicas = strategy.num_replicas_in_sync
        for name in names:
            value = getattr(params, name)
            if value % replicas:
                raise UsageError(f"--{name} {value} is not divisible by the {replicas} replicas")
