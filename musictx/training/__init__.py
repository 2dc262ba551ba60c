"""Training: the DataModule and its train-only windows (augmentation, the recall curriculum), the Lightning
module around a net, callbacks and loggers, starting from saved weights and resuming a run (`run` is the job
behind ``musictx-train``)."""
