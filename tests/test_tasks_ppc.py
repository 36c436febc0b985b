"""The PPC tasks: responses checked by independent reference solvers, coupled ids as
docs/reconstruction.md, "Position coupling and PPC" gives them, sizes as configured, seeded and vectorized samplers."""

import pytest
import torch

from sparselen.batch import IGNORE
from sparselen.rng import generator
from sparselen.ppc.tasks import addition, copy_repeat, pointer_copy, variable_assignment
from sparselen.ppc.samples import random_offsets, to_batch

SIZES = torch.tensor([1, 2, 3, 5, 8, 13, 7, 4])


def rows(module, s):
    """Each sample as (prompt tokens, prompt ids, response tokens, response ids), decoded."""
    out = []
    for i in range(len(s)):
        P, L = int(s.prompt_len[i]), int(s.length[i])
        words = [module.VOCAB[t] for t in s.tokens[i, :L].tolist()]
        ids = s.position_ids[i, :L].tolist()
        assert "<pad>" not in words
        out.append((words[:P], ids[:P], words[P:], ids[P:]))
    return out


def test_copy_repeat():
    s = copy_repeat.sample(SIZES, generator("t", 0), alphabet=3)
    for n, (prompt, pid, resp, rid) in zip(SIZES.tolist(), rows(copy_repeat, s)):
        assert prompt[-2:] == [".", ">"] and len(prompt) == n + 2
        assert set(prompt[:-2]) <= set("abc")
        assert resp == prompt[:-2] + ["$"]  # the copy, then end of response
        # response token j is coupled to the prompt token it copies, "$" to the end mark "."
        assert rid == pid[:-1]
        assert pid == list(range(1, n + 2)) + [0]


def test_addition():
    s = addition.sample(SIZES, generator("t", 1))
    for n, (prompt, pid, resp, rid) in zip(SIZES.tolist(), rows(addition, s)):
        text = "".join(prompt)
        a, b = text[:-1].split("+")
        # n digits each, written with one leading zero
        assert len(a) == len(b) == n + 1 and a[0] == b[0] == "0" and text.endswith("=")
        assert resp[-1] == "$" and len(resp) == n + 2
        assert int("".join(reversed(resp[:-1]))) == int(a) + int(b)
        # digits of equal significance share an id, in the operands and in the sum
        sig_a = {n - i: pid[i] for i in range(n + 1)}
        sig_b = {n - i: pid[n + 2 + i] for i in range(n + 1)}
        assert sig_a == sig_b == {k: k + 1 for k in range(n + 1)}
        assert all(rid[k] == sig_a[k] for k in range(n + 1))
        # "$" is coupled to "+", one id above the operands' top digit; "=" precedes digit 0
        assert rid[-1] == pid[n + 1] == n + 2 and prompt[n + 1] == "+" and pid[-1] == 0
        assert rid == list(range(1, n + 3))


def reference_walk(prompt):
    """Evaluate the program independently: the chain from the queried variable to its
    constant, as [(token, index in the prompt of the token that token is coupled to)]."""
    body, query = prompt[:-3], prompt[-3:]
    assert query[0] == "?" and query[2] == ">" and body[-1] == ";"
    defs, at = {}, 0
    while at < len(body):  # lines "v = rhs ;", rhs a variable or a constant of digits
        end = body.index(";", at)
        lhs, eq, rhs = body[at], body[at + 1], body[at + 2:end]
        assert eq == "=" and lhs not in defs and rhs
        assert len(rhs) == 1 or all(t.isdigit() for t in rhs)
        defs[lhs] = (at, rhs)
        at = end + 1
    walk, var = [], query[1]
    while var in defs:
        at, rhs = defs[var]
        walk.append((var, at))  # a variable: coupled to the line that defines it
        if not rhs[0].isdigit():
            var = rhs[0]
            continue
        # the constant, digit by digit: each coupled to the digit it copies
        walk += [(d, at + 2 + i) for i, d in enumerate(rhs)]
        return walk, len(rhs)
    raise AssertionError(f"the chain from {query[1]} does not end in a constant")


@pytest.mark.parametrize("value_digits", [(1, 1), (2, 4)])
def test_variable_assignment(value_digits):
    s = variable_assignment.sample(SIZES, generator("t", 2), num_variables=16, max_depth=3,
                                   value_digits=value_digits)
    depths, widths = [], []
    for n, (prompt, pid, resp, rid) in zip(SIZES.tolist(), rows(variable_assignment, s)):
        assert pid == list(range(len(prompt))) and prompt.count(";") == n
        assert len(prompt) <= variable_assignment.max_prompt_len(n, value_digits)
        walk, m = reference_walk(prompt)
        assert value_digits[0] <= m <= value_digits[1]
        assert resp == [v for v, _ in walk] + ["$"]
        # "$" is coupled to the ";" after the constant
        assert rid == [pid[at] for _, at in walk] + [pid[walk[-1][1]] + 1]
        depths.append(len(walk) - m)
        widths.append(m)
        assert 1 <= depths[-1] <= min(3, n)
    assert len(set(depths)) > 1
    assert len(set(widths)) == value_digits[1] - value_digits[0] + 1


def test_variable_assignment_depth_distribution():
    s = variable_assignment.sample(torch.full((600,), 10), generator("t", 3), num_variables=16, max_depth=3)
    depth = (s.length - s.prompt_len - 2).bincount(minlength=4)[1:]  # one-digit constants
    assert depth.min() > 150  # uniform over 1..3


def reference_line(prompt):
    """Read the prompt independently: the queried line's key and symbols, each with the index
    in the prompt of the token it is, and the index of the ";" that ends the line."""
    body, query = prompt[:-1], prompt[-1]
    assert query.startswith("?k") and body[-1] == ";"
    lines, at = {}, 0
    while at < len(body):  # lines "k x_1 .. x_m ;"
        end = body.index(";", at)
        key, symbols = body[at], body[at + 1:end]
        assert key.startswith("k") and key not in lines and symbols
        assert all(len(x) == 1 and x.isalpha() for x in symbols)
        lines[key] = [(key, at)] + [(x, at + 1 + i) for i, x in enumerate(symbols)], end
        at = end + 1
    return lines[query[1:]], len(lines)


@pytest.mark.parametrize("line_length", [(3, 3), (2, 5)])
def test_pointer_copy(line_length):
    s = pointer_copy.sample(SIZES, generator("t", 8), num_keys=16, alphabet=3, line_length=line_length)
    widths, queried = [], []
    for n, (prompt, pid, resp, rid) in zip(SIZES.tolist(), rows(pointer_copy, s)):
        assert pid == list(range(len(prompt)))
        assert len(prompt) <= pointer_copy.max_prompt_len(n, line_length)
        (line, semi), lines = reference_line(prompt)
        assert lines == n and prompt.count(";") == n
        assert set(t for t in prompt if len(t) == 1 and t.isalpha()) <= set("abc")
        assert line_length[0] <= len(line) - 1 <= line_length[1]
        # the response restates the queried line, key and ";" included; each token is coupled
        # to the token it restates, so the ids run on by 1 from the line's key
        assert resp == [x for x, _ in line] + [";"]
        assert rid == [pid[at] for _, at in line] + [pid[semi]]
        assert rid == list(range(rid[0], rid[0] + len(resp)))
        widths.append(len(line) - 1)
        queried.append(prompt.index(prompt[-1][1:]))
    assert len(set(widths)) == line_length[1] - line_length[0] + 1
    assert len(set(queried)) > 3  # the queried line, hence the first response id, varies


def test_pointer_copy_queries_every_line():
    s = pointer_copy.sample(torch.full((800,), 4), generator("t", 9), line_length=(3, 3))
    first = s.position_ids[torch.arange(len(s)), s.prompt_len]  # first response id: 5 * line
    assert set(first.tolist()) == {0, 5, 10, 15}
    assert first.bincount()[[0, 5, 10, 15]].min() > 150  # uniform over the 4 lines


@pytest.mark.parametrize("module", [copy_repeat, addition, variable_assignment, pointer_copy])
def test_seeded_and_vectorized(module):
    a = module.sample(SIZES, generator("t", 4))
    b = module.sample(SIZES, generator("t", 4))
    c = module.sample(SIZES, generator("t", 5))
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.position_ids, b.position_ids)
    assert not torch.equal(a.tokens, c.tokens)
    # the prompt grows with the size exactly as the task defines it
    per_size = {copy_repeat: SIZES + 2, addition: 2 * SIZES + 4, variable_assignment: 4 * SIZES + 3,
                pointer_copy: 5 * SIZES + 1}[module]
    assert torch.equal(a.prompt_len, per_size)


@pytest.mark.parametrize("module", [copy_repeat, addition, variable_assignment, pointer_copy])
def test_batch_alignment_and_offsets(module):
    s = module.sample(SIZES, generator("t", 6))
    off = random_offsets(s, 80, generator("o", 0))
    b = to_batch(s, off)
    assert int(b.position_ids.max()) <= 80 and len(set(off.tolist())) > 1
    for i in range(len(s)):
        P, L = int(s.prompt_len[i]), int(s.length[i])
        # position t predicts token t+1 and its id, on response tokens only
        assert b.labels[i, P - 1:L - 1].tolist() == s.tokens[i, P:L].tolist()
        assert b.position_labels[i, P - 1:L - 1].tolist() == (s.position_ids[i, P:L] + off[i]).tolist()
        assert (b.labels[i, :P - 1] == IGNORE).all() and (b.labels[i, L - 1:] == IGNORE).all()
        assert (b.position_labels[i, :P - 1] == IGNORE).all()
    with pytest.raises(ValueError, match="max_position_id"):
        random_offsets(s, 3, generator("o", 1))


def test_bad_task_arguments():
    with pytest.raises(ValueError, match="alphabet"):
        copy_repeat.sample(SIZES, generator("t", 7), alphabet=11)
    with pytest.raises(ValueError, match="num_variables"):
        variable_assignment.sample(SIZES, generator("t", 7), num_variables=8)
    with pytest.raises(ValueError, match="value_digits"):
        variable_assignment.sample(SIZES, generator("t", 7), value_digits=(3, 2))
    with pytest.raises(ValueError, match="num_keys"):
        pointer_copy.sample(SIZES, generator("t", 7), num_keys=8)
    with pytest.raises(ValueError, match="line_length"):
        pointer_copy.sample(SIZES, generator("t", 7), line_length=(3, 2))
