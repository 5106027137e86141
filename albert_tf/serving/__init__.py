"""Exports: SavedModels with their signatures, TFLite, and running an export (predict, TF Serving REST rules)."""
