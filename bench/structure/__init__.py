"""Structure benchmark: documents whose structure is known by construction, a scorer
over the Markdown users read, and a side-by-side run of docparse, pymupdf4llm with its layout
model, and raw pymupdf (bench/README.md, "Structure")."""
