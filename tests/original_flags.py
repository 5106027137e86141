"""Flags and defaults of the original google-research/albert scripts (read from albert@4ae12a2 + final master), for the flag-parity tests.

Full commit: google-research/albert@4ae12a256efbf091430bbf7bf44cebead110262e.

Provenance (what was read, and why these commits):

* run_pretraining.py, run_classifier.py, run_squad_v1.py, run_squad_v2.py, run_race.py, classifier_utils.py,
  squad_utils.py, fine_tuning_utils.py, optimization.py: google-research/albert@4ae12a2 (the "from albert import
  ..." sync of spring 2020, the newest commit of these files held in the search index). Older commits read for
  comparison (7800347, fad4bd97) have the same flags except run_squad_v1.py, where fad4bd97 lacks use_einsum and
  export_dir.
* run_classifier.py on the final master also defines export_dir and threshold_to_export (a SavedModel export
  added after 4ae12a2). The index has no google-research copy of that version; it was read from the fork
  niketanpansare/albert@2eb82742, an unmodified snapshot of the final master apart from one import line. That
  snapshot's run_pretraining/run_squad_v1/run_squad_v2/run_race/create_pretraining_data flags equal the ones here.
* create_pretraining_data.py: google-research/albert@0cf7f574 and @24b1eb92, and the final-master snapshot above.
  Only `parallel` differs between them: PR #163 (merged Feb 2020, seen at 0cf7f574) added it, and the later sync
  that switched the imports to "from albert import" dropped it again, so it is not in ORIGINAL_FLAGS but in
  FLAGS_DROPPED_BEFORE_FINAL_MASTER.

Helper modules (classifier_utils.py, squad_utils.py, race_utils.py, fine_tuning_utils.py, modeling.py,
optimization.py, lamb_optimizer.py, tokenization.py) define no flags, so no script gets any flag from its imports;
HELPER_MODULE_FLAGS records that. Each script defines its own copy of the TPU flags.

Defaults are the Python values the original's flags hold after absl parses them (an enum's default is its string).
No original script defines a list flag. threshold_to_export's default is NaN, which is never equal to itself:
compare it with math.isnan.

INERT_IN_ORIGINAL is keyed by script, then flag (a flag can be inert in one script and used in another, e.g.
keep_checkpoint_max). It lists only flags whose value the original code never reads or always overrides;
TPU_ONLY_IN_ORIGINAL lists flags that are read but only matter when use_tpu=True.
"""

# The TPU block every original script defines for itself (same names, same defaults everywhere).
TPU_FLAGS = {
    "use_tpu": False,
    "tpu_name": None,
    "tpu_zone": None,
    "gcp_project": None,
    "master": None,
    "num_tpu_cores": 8,
}

# run_squad_v1.py and run_squad_v2.py define these the same way; each adds its own below.
_SQUAD_FLAGS = {
    "albert_config_file": None,
    "vocab_file": None,
    "spm_model_file": None,
    "output_dir": None,
    "train_file": None,
    "predict_file": None,
    "train_feature_file": None,
    "predict_feature_file": None,
    "predict_feature_left_file": None,
    "init_checkpoint": None,
    "albert_hub_module_handle": None,
    "do_lower_case": True,
    "max_seq_length": 384,
    "doc_stride": 128,
    "max_query_length": 64,
    "do_train": False,
    "do_predict": False,
    "train_batch_size": 32,
    "predict_batch_size": 8,
    "learning_rate": 5e-5,
    "num_train_epochs": 3.0,
    "warmup_proportion": 0.1,
    "save_checkpoints_steps": 1000,
    "iterations_per_loop": 1000,
    "n_best_size": 20,
    "max_answer_length": 30,
    **TPU_FLAGS,
}

ORIGINAL_FLAGS = {
    "create_pretraining_data.py": {
        "input_file": None,
        "output_file": None,
        "vocab_file": None,
        "spm_model_file": None,
        "input_file_mode": "r",
        "do_lower_case": True,
        "do_whole_word_mask": True,
        "do_permutation": False,
        "favor_shorter_ngram": True,
        "random_next_sentence": False,
        "max_seq_length": 512,
        "ngram": 3,
        "max_predictions_per_seq": 20,
        "random_seed": 12345,
        "dupe_factor": 40,
        "masked_lm_prob": 0.15,
        "short_seq_prob": 0.1,
    },
    "run_pretraining.py": {
        "albert_config_file": None,
        "input_file": None,
        "output_dir": None,
        "init_checkpoint": None,
        "max_seq_length": 512,
        "max_predictions_per_seq": 20,
        "do_train": True,
        "do_eval": False,
        "train_batch_size": 4096,
        "eval_batch_size": 64,
        "optimizer": "lamb",  # enum: see ENUM_CHOICES
        "learning_rate": 0.00176,
        "poly_power": 1.0,
        "num_train_steps": 125000,
        "num_warmup_steps": 3125,
        "start_warmup_step": 0,
        "save_checkpoints_steps": 5000,
        "keep_checkpoint_max": 5,
        "iterations_per_loop": 1000,
        "max_eval_steps": 100,
        "init_from_group0": False,
        "masked_lm_budget": 0.0,  # the source writes the int 0; DEFINE_float stores 0.0
        **TPU_FLAGS,
    },
    "run_classifier.py": {
        "data_dir": None,
        "albert_config_file": None,
        "task_name": None,
        "vocab_file": None,
        "spm_model_file": None,
        "output_dir": None,
        "cached_dir": None,
        "init_checkpoint": None,
        "albert_hub_module_handle": None,
        "do_lower_case": True,
        "max_seq_length": 512,
        "do_train": False,
        "do_eval": False,
        "do_predict": False,
        "train_batch_size": 32,
        "eval_batch_size": 8,
        "predict_batch_size": 8,
        "learning_rate": 5e-5,
        "train_step": 1000,
        "warmup_step": 0,
        "save_checkpoints_steps": 1000,
        "keep_checkpoint_max": 5,
        "iterations_per_loop": 1000,
        "optimizer": "adamw",  # a plain DEFINE_string here, not an enum
        **TPU_FLAGS,
        # Final master only (not at 4ae12a2):
        "export_dir": None,
        "threshold_to_export": float("nan"),
    },
    "run_squad_v1.py": {**_SQUAD_FLAGS, "use_einsum": True, "export_dir": None},
    "run_squad_v2.py": {**_SQUAD_FLAGS, "start_n_top": 5, "end_n_top": 5, "dropout_prob": 0.1},
    "run_race.py": {
        "data_dir": None,
        "albert_config_file": None,
        "task_name": "race",
        "vocab_file": None,
        "train_file": None,
        "eval_file": None,
        "predict_file": None,
        "spm_model_file": None,
        "output_dir": None,
        "init_checkpoint": None,
        "albert_hub_module_handle": None,
        "do_lower_case": True,
        "dropout_prob": 0.1,
        "max_seq_length": 512,
        "max_qa_length": 128,
        "num_keep_checkpoint": 5,
        "high_only": False,
        "middle_only": False,
        "do_train": True,
        "do_eval": True,
        "do_predict": False,
        "train_batch_size": 32,
        "eval_batch_size": 8,
        "predict_batch_size": 8,
        "learning_rate": 1e-5,
        "train_step": 12000,
        "warmup_step": 1000,
        "save_checkpoints_steps": 100,
        "iterations_per_loop": 1000,
        **TPU_FLAGS,
    },
}

# The only enum flag in the original scripts (everything else is string/integer/float/bool).
ENUM_CHOICES = {
    "run_pretraining.py": {"optimizer": ["adamw", "lamb"]},
}

# Flags that existed on master for a while but are gone from the final master (see the module docstring).
FLAGS_DROPPED_BEFORE_FINAL_MASTER = {
    "create_pretraining_data.py": {"parallel": False},
}

# flags.mark_flag_as_required(...) in each script's __main__ block.
REQUIRED_IN_ORIGINAL = {
    "create_pretraining_data.py": ["input_file", "output_file", "vocab_file"],
    "run_pretraining.py": ["input_file", "albert_config_file", "output_dir"],
    "run_classifier.py": ["data_dir", "task_name", "spm_model_file", "output_dir"],
    "run_squad_v1.py": ["spm_model_file", "albert_config_file", "output_dir"],
    "run_squad_v2.py": ["spm_model_file", "albert_config_file", "output_dir"],
    "run_race.py": ["data_dir", "spm_model_file", "albert_config_file", "output_dir"],
}

# Helper modules the scripts import, and the flags they define (none).
HELPER_MODULE_FLAGS = {
    "classifier_utils.py": {},  # imported by run_classifier.py, run_race.py
    "squad_utils.py": {},  # imported by run_squad_v1.py, run_squad_v2.py
    "race_utils.py": {},  # imported by run_race.py
    "fine_tuning_utils.py": {},  # imported by run_classifier.py, run_squad_v1.py, run_squad_v2.py, run_race.py
    "modeling.py": {},  # imported by every script but create_pretraining_data.py
    "optimization.py": {},  # imported by run_pretraining.py and the *_utils modules
    "lamb_optimizer.py": {},  # imported by optimization.py
    "tokenization.py": {},  # imported by create_pretraining_data.py and the *_utils modules
}

# flags that the original accepts but whose value changes nothing in its code, per script (name -> why)
INERT_IN_ORIGINAL = {
    "create_pretraining_data.py": {},
    "run_pretraining.py": {},
    "run_classifier.py": {
        "keep_checkpoint_max": "RunConfig is built with keep_checkpoint_max=0 (keep all); the flag is never read.",
        "vocab_file": "spm_model_file is required, and a SentencePiece tokenizer ignores the vocab file.",
    },
    "run_squad_v1.py": {
        "vocab_file": "spm_model_file is required; the tokenizer and squad_utils use only the SentencePiece model.",
    },
    "run_squad_v2.py": {
        "vocab_file": "spm_model_file is required; the tokenizer and squad_utils use only the SentencePiece model.",
    },
    "run_race.py": {
        "num_keep_checkpoint": "never read: RunConfig is built with keep_checkpoint_max=0.",
        "predict_file": "never read: the test features always go to <output_dir>/predict.tf_record.",
        "vocab_file": "spm_model_file is required, and a SentencePiece tokenizer ignores the vocab file.",
    },
}

# Flags that are read but only change anything when use_tpu=True (TPUEstimator falls back to CPU/GPU otherwise).
TPU_ONLY_IN_ORIGINAL = {
    "tpu_name": "used only under `if FLAGS.use_tpu and FLAGS.tpu_name` to build the TPU cluster resolver.",
    "tpu_zone": "passed to the TPU cluster resolver, which is built only with use_tpu and tpu_name.",
    "gcp_project": "passed to the TPU cluster resolver, which is built only with use_tpu and tpu_name.",
    "num_tpu_cores": "TPUConfig(num_shards=...), unused by TPUEstimator when use_tpu=False.",
    "iterations_per_loop": "TPUConfig(iterations_per_loop=...); the fine-tuning scripts cap it at "
                           "save_checkpoints_steps when training.",
}
