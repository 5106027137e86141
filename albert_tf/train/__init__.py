"""Training machinery: optimizers, distribution strategies, the train/test step, callbacks and the runner."""
