"""The graph's Mermaid drawing, stored, so `bashgraph graph` prints it without building the graph.

Building the graph imports LangChain and LangGraph (most of a second); the default format of
`bashgraph graph` needs neither. The text is what `draw(agent, "mermaid")` gives for the graph
as built by `inspection_agent()`: tests/graph/test_draw.py compares the two, so a change to the
graph that is not copied here fails the tests. Other formats are drawn from the real graph.
"""

MERMAID = (
    '---\n'
    'config:\n'
    '  flowchart:\n'
    '    curve: linear\n'
    '---\n'
    'graph TD;\n'
    '\t__start__([<p>__start__</p>]):::first\n'
    '\tagent(agent)\n'
    '\tapprove(approve)\n'
    '\ttools(tools)\n'
    '\troute(route)\n'
    '\tretry(retry)\n'
    '\treplan(replan)\n'
    '\tescalate(escalate)\n'
    '\t__end__([<p>__end__</p>]):::last\n'
    '\t__start__ --> agent;\n'
    '\tagent -.-> __end__;\n'
    '\tagent -.-> approve;\n'
    '\tagent -.-> tools;\n'
    '\tapprove --> tools;\n'
    '\tescalate -.-> __end__;\n'
    '\tescalate -.-> agent;\n'
    '\tescalate -.-> retry;\n'
    '\treplan --> agent;\n'
    '\tretry --> route;\n'
    '\troute -.-> __end__;\n'
    '\troute -.-> agent;\n'
    '\troute -.-> escalate;\n'
    '\troute -.-> replan;\n'
    '\troute -.-> retry;\n'
    '\ttools --> route;\n'
    '\tclassDef default fill:#f2f0ff,line-height:1.2\n'
    '\tclassDef first fill-opacity:0\n'
    '\tclassDef last fill:#bfb6fc\n'
)
