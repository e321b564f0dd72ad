"""Ingestion: published image folders (3DIdent, Causal3DIdent) and labelled image datasets (MNIST, CIFAR-10,
CelebA, ...) converted into ident3d stores, and stores exported back to the published layout."""
