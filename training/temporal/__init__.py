"""Learners for interventional sequences (CITRIS-style): transitions (x_t, x_{t+1}, I_{t+1}) from arrays, the
CITRIS-style VAE with a per-variable transition prior, an iVAE-style baseline and a time-contrastive baseline."""
