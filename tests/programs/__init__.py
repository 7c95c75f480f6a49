"""User programs that the reverse-mode tests transform (astjax reads their source)."""
