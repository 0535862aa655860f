"""A job (orchestration): its identity from the composed config (no torch), teacher keys, and preparation."""
