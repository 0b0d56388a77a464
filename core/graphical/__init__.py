"""graphical."""
