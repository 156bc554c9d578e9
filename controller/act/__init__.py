"""Acting on what the watch found: recovery policies ([recover]) decided and carried out."""
