"""The media every report renders into.

- `render.terminal`: the console every command prints through, and plain mode
- `render.ascii_text`: ASCII spellings of specbench's symbols (`--plain`)
- `render.blocks`: document blocks and their Markdown / self-contained HTML renderings
- `render.figure_file`: writing a figure so that a failed write is an error
"""
