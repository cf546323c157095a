"""The graph's Mermaid drawing and edge list, stored, so `bashgraph graph` prints them without
building the graph.

Building the graph imports LangChain and LangGraph (most of a second); the default format of
`bashgraph graph` needs neither. The text is what `draw(agent, "mermaid")` gives for the graph
as built by `build_graph()` (no model), and `ASCII` what `draw(agent, "ascii")` gives:
tests/graph/test_draw.py compares them, so a change to the graph that is not copied here fails
the tests. Other formats are drawn from the real graph.
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

#: `draw(agent, "ascii")` of the same graph: the edge list of `--format ascii` (graph/edge_list.py).
ASCII = (
    "The agent's graph, edge by edge (--> always taken; ..> chosen by a router,\n"
    'with the outcome that takes it):\n'
    '\n'
    'start\n'
    '  --> agent\n'
    'agent\n'
    '  ..> approve   ask / deny / invalid call\n'
    '  ..> tools     every call allowed\n'
    '  ..> compact   over budget / too long\n'
    '  ..> end       answer / final status\n'
    'approve\n'
    '  --> tools\n'
    'tools\n'
    '  ..> agent     ok\n'
    '  ..> route     exit_error / spawn_error / args_error / denied\n'
    'route\n'
    '  ..> agent     exit_error / args_error / denied / ok after retry\n'
    '  ..> retry     transient spawn_error\n'
    '  ..> replan    exit_error ×N / repeat\n'
    '  ..> escalate  other spawn_error / retries spent\n'
    '  ..> end       args_error ×N / no progress after re-plans\n'
    'retry\n'
    '  --> route\n'
    'replan\n'
    '  --> agent\n'
    'escalate\n'
    '  ..> agent     skip / hint / model told\n'
    '  ..> retry     answer: retry\n'
    '  ..> end       abort / stop\n'
    'compact\n'
    '  ..> agent     compacted\n'
    '  ..> end       still too long\n'
)
