"""Front end: from a user's Python function to a checked, resolved gast AST."""
