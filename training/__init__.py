"""Self-supervised training on ident3d stores: data, view makers, encoders, objectives, the trainer."""
