"""Data (foundations): GLUE/TSV loading and tokenising, batching, the corpus, augmentation, decoder data."""
