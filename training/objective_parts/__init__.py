"""What the objectives of ``ident3d.training.objectives`` are built from, registering nothing: the objective
interface (``base.Objective``), the bases a family shares (``generative``: the VAEs' Gaussian posterior and mirrored
decoder, also what the temporal learners of ``ident3d.training.temporal`` hold; ``momentum``: an EMA copy of the
encoder; ``slot_base``: the slot learners; ``transition``: the learners on interventional transitions;
``image_text``: the image/text learners, with their text encoder) and CRL-TAC's parts (``crl_tac_input``,
``crl_tac_optim``, ``crl_tac_start``). The loss functions are in ``ident3d.training.losses``."""
