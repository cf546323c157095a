"""A Hypothesis grammar of shell text, for the differential oracle (tests/support/bash_oracle.py).

It mixes what the review's bypasses were made of: quotes of every kind, parameter expansions
with quotes and braces inside, command and process substitutions, backticks, arithmetic,
here-documents (to `cat` and to a shell, inside substitutions too), loops in every spelling
(`for x do`, `for ((…)) do`), `case` (inside substitutions too), functions, wrappers, `eval`,
`bash -c`, `sh -c` and redirections. The programs it runs are harmless; distinct names let the
oracle tell which command a reader missed.
"""

from __future__ import annotations

import shlex

from hypothesis import strategies as st

#: Harmless programs with distinct names (the sandbox's root is read-only anyway).
PROGRAMS = ("true", "id", "date", "ls", "uname", "whoami", "pwd", "hostname", "tty", "nproc")

_LITERALS = st.sampled_from(["a", "x y", "}", ")", "(", "{", ";", "'", '"', "EOF", "esac", "do",
                             "#", "\\", "|", "&", "$", "`", "E)", "*", "~"])


def _single_quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _double_quoted(text: str) -> str:
    return '"' + "".join("\\" + c if c in '"\\$`' else c for c in text) + '"'


def _words(commands: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """A word: literal or quoted text, expansions, and substitutions holding `commands`."""
    literal = _LITERALS.map(shlex.quote)
    return st.one_of(
        st.sampled_from(["a", "b1", "-n", "--x", "x=1", "$x", "${x}", "$1", "$#", "~", "*.none"]),
        literal,
        _LITERALS.map(_single_quoted),
        _LITERALS.map(_double_quoted),
        _LITERALS.map(lambda t: f"${{x:-{shlex.quote(t)}}}"),
        _LITERALS.map(lambda t: f"${{x:-{t}}}"),
        _LITERALS.map(lambda t: f'"${{x:-{t}}}"'),
        st.sampled_from(["$'\\x41'", "$'a\\'b'", "$((1<<2))", "$[1+1]", "${#x}", "${x%a}"]),
        commands.map(lambda c: f"$({c})"),
        commands.map(lambda c: f'"$({c})"'),
        commands.map(lambda c: f"`{c}`"),
        commands.map(lambda c: f"<({c})"),
        commands.map(lambda c: f"$(cat <<EOF\n{c}\nEOF\n)"),
    )


def _simple(commands: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    words = _words(commands)
    prefix = st.sampled_from(["", "x=1 ", "nice ", "env ", "command ", "timeout 5 ", "builtin ",
                              "time ", "! ", "exec 3>&1; "])
    redirect = st.sampled_from(["", " >/dev/null", " 2>&1", " </dev/null", " <<<word",
                                " >>/tmp/w/out", " 2>/dev/null"])
    return st.builds(lambda p, name, args, r: f"{p}{name} {' '.join(args)}{r}".rstrip(),
                     prefix, st.sampled_from(PROGRAMS), st.lists(words, max_size=3), redirect)


def _compound(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    word = _words(inner)
    return st.one_of(
        st.builds(lambda a, b, op: f"{a}{op}{b}", inner, inner,
                  st.sampled_from([" ; ", " && ", " || ", " | ", "\n", " & ", " |& "])),
        inner.map(lambda c: f"( {c} )"),
        inner.map(lambda c: f"{{ {c}; }}"),
        st.builds(lambda c, d: f"if {c}; then {d}; fi", inner, inner),
        st.builds(lambda w, c: f"for v in {w}; do {c}; done", word, inner),
        inner.map(lambda c: f"for v do {c}; done"),
        inner.map(lambda c: f"for ((i=0;i<1;i++)) do {c}; done"),
        inner.map(lambda c: f"for ((i=0;i<1;i++)); do {c}; done"),
        inner.map(lambda c: f"while false; do :; done; {c}"),
        st.builds(lambda w, p, c: f"case {w} in {p}) {c};; *) {c} ;; esac", word,
                  st.sampled_from(["a", "a|b", "(a)", "*", '")"', "x)"]), inner),
        inner.map(lambda c: f"f() {{ {c}; }}; f"),
        inner.map(lambda c: f"eval {shlex.quote(c)}"),
        inner.map(lambda c: f"bash -c {shlex.quote(c)}"),
        inner.map(lambda c: f"sh -c {shlex.quote(c)}"),
        inner.map(lambda c: f"bash <<'EOF'\n{c}\nEOF"),
        inner.map(lambda c: f"cat <<EOF\n{c}\nEOF"),
        inner.map(lambda c: f"echo {shlex.quote(c)} | bash"),
        inner.map(lambda c: f"trap {shlex.quote(c)} EXIT"),
        inner.map(lambda c: f"(( 1 )) && {c}"),
        inner.map(lambda c: f"[[ a == a ]] && {c}"),
        inner.map(lambda c: f"{c} # {c}"),
        inner.map(lambda c: f"{c} \\\n {c}"),
        st.sampled_from(PROGRAMS).map(lambda p: f"c={p}; $c"),
        st.sampled_from(PROGRAMS).map(lambda p: f"c={p[:-1]}; ${{c}}{p[-1]}"),
        st.sampled_from(PROGRAMS).map(lambda p: f"nice $(echo {p})"),
        st.sampled_from(PROGRAMS).map(lambda p: f"{p[0]}''{p[1:]}; \\{p}; $'{p}'"),
        st.builds(lambda p, use: f"x='a[$({p})]'; {use}", st.sampled_from(PROGRAMS),
                  st.sampled_from(["echo $((x))", "(( x ))", "declare -i y=x", "[[ -v $x ]]",
                                   "printf -v \"$x\" %s 1", "echo ${b[x]}", "let x", "read \"$x\" <<<1"])),
        inner.map(lambda c: f"a=( {shlex.quote(c)} ); \"${{a[@]}}\""),
        inner.map(lambda c: f"until true; do :; done; {c}"),
        inner.map(lambda c: f"function g {{ {c}; }}; g"),
        inner.map(lambda c: f"coproc {{ {c}; }}; wait"),
        inner.map(lambda c: f"case a in a) {c} ;& b) {c} ;;& *) {c};; esac"),
        inner.map(lambda c: f"x=$( {c} ) && echo \"$x\""),
        inner.map(lambda c: f"[[ a =~ (a|b) ]] && {c}"),
        inner.map(lambda c: f"cat <<'EOF' | bash\n{c}\nEOF"),
        inner.map(lambda c: f"bash <<< {shlex.quote(c)}"),
        inner.map(lambda c: f"source <(echo {shlex.quote(c)})"),
        st.sampled_from(PROGRAMS).map(lambda p: f"{p[0]}\\\n{p[1:]}"),
        st.sampled_from(PROGRAMS).map(lambda p: f"/usr/bin/{p[0]}?{p[2:]} 2>/dev/null; {{fd}}>/dev/null {p}"),
        st.builds(lambda c, d: f"cat <<EOF\n{c} \\\nEOF\n{d}\nEOF", inner, inner),
        st.builds(lambda c, d: f"x=$(cat <<'E'\n{c}\nE\n); {d}", inner, inner),
        st.builds(lambda c, d: f"cat <<A <<B\n{c}\nA\n{d}\nB", inner, inner),
        inner.map(lambda c: f"mapfile -C {shlex.quote(c)} -c 1 <<<x"),
        inner.map(lambda c: f"echo \"$(echo \")\"; {c}; echo \"(\")\""),
        inner.map(lambda c: f"echo $(echo a # )\n{c})"),
    )


def shell_lines() -> st.SearchStrategy[str]:
    """Lines of shell: simple commands nested in compound ones and substitutions."""
    return st.recursive(st.deferred(lambda: _simple(st.sampled_from(PROGRAMS))),
                        lambda inner: st.one_of(_simple(inner), _compound(inner)), max_leaves=6)


#: Tokens of shell, for lines that are often not valid: bash runs what it can read of a line
#: before a syntax error stops it, and the reader must see all of that too.
TOKENS = (" ", " ", ";", "\n", "|", "&", "&&", "(", ")", "{", "}", "'", '"', "`", "$(", "${", "$((",
          "))", "<<E\n", "\nE\n", "E)", "<<<", ">", "2>&1", "<(", "\\", "\\\n", "#", "case ", " in ",
          "esac", ";;", "for ", "do ", "done", "if ", "then ", "fi", "while ", "x=", "$x", "eval ",
          "bash -c ", "sh -c ", "trap ", "nice ", "!", "[[ ", " ]]", "=", ":-", "$'", "\\'", "((",
          "function ", "coproc ", "time ", "-", "*", "?", "{fd}", "mapfile -C ", *PROGRAMS)


def token_soup() -> st.SearchStrategy[str]:
    """Lines of 3 to 25 shell tokens in any order."""
    return st.lists(st.sampled_from(TOKENS), min_size=3, max_size=25).map("".join)
