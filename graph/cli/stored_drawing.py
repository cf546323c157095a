"""The graph's Mermaid drawing, stored, so `bashgraph graph` prints it without building the graph.

Building the graph imports LangChain and LangGraph (most of a second); the default format of
`bashgraph graph` needs neither. The text is what `draw(agent, "mermaid")` gives for the graph
as built by `build_graph()` (no model): tests/graph/test_draw.py compares the two, so a change
to the graph that is not copied here fails the tests. Other formats are drawn from the real graph.
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
    '\tcompact(compact)\n'
    '\t__end__([<p>__end__</p>]):::last\n'
    '\t__start__ --> agent;\n'
    '\tagent -. &nbsp;answer / final status&nbsp; .-> __end__;\n'
    '\tagent -. &nbsp;ask / deny / invalid call&nbsp; .-> approve;\n'
    '\tagent -. &nbsp;over budget / too long&nbsp; .-> compact;\n'
    '\tagent -. &nbsp;every call allowed&nbsp; .-> tools;\n'
    '\tapprove --> tools;\n'
    '\tcompact -. &nbsp;still too long&nbsp; .-> __end__;\n'
    '\tcompact -. &nbsp;compacted&nbsp; .-> agent;\n'
    '\tescalate -. &nbsp;abort / stop&nbsp; .-> __end__;\n'
    '\tescalate -. &nbsp;skip / hint / model told&nbsp; .-> agent;\n'
    '\tescalate -. &nbsp;answer: retry&nbsp; .-> retry;\n'
    '\treplan --> agent;\n'
    '\tretry --> route;\n'
    '\troute -. &nbsp;args_error ×N / no progress after re-plans&nbsp; .-> __end__;\n'
    '\troute -. &nbsp;exit_error / args_error / denied / ok after retry&nbsp; .-> agent;\n'
    '\troute -. &nbsp;other spawn_error / retries spent&nbsp; .-> escalate;\n'
    '\troute -. &nbsp;exit_error ×N / repeat&nbsp; .-> replan;\n'
    '\troute -. &nbsp;transient spawn_error&nbsp; .-> retry;\n'
    '\ttools -. &nbsp;ok&nbsp; .-> agent;\n'
    '\ttools -. &nbsp;exit_error / spawn_error / args_error / denied&nbsp; .-> route;\n'
    '\tclassDef default fill:#f2f0ff,line-height:1.2\n'
    '\tclassDef first fill-opacity:0\n'
    '\tclassDef last fill:#bfb6fc\n'
)
