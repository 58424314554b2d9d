"""trainrt."""
