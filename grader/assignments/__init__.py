"""One module per assignment: its random cases, its likely mistakes, and its registry entry ``ASSIGNMENT``."""
