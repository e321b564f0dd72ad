"""The loss functions objectives share, plain functions of tensors that register nothing: contrastive,
redundancy-reduction, entropy and EMA helpers (``functional``), the VAE family's Gaussian terms (``gaussian``, also
the temporal learners'), CRL-TAC's objective over every crop (``crl_tac_exact``) and the image/text losses
(``multimodal``)."""
