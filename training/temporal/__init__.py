"""Learners for interventional sequences (CITRIS-style): transitions (x_t, x_{t+1}, I_{t+1}) from arrays, the
CITRIS-style VAE with a per-variable transition prior and an iVAE-style baseline; they train as the objectives
``citris_vae`` and ``ivae_temporal`` (time-contrastive learning is ``infonce`` with the ``next_frame`` views)."""
