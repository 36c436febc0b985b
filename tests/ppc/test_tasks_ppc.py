"""The PPC tasks: responses checked by independent reference solvers, coupled ids as
docs/reconstruction.md, "Position coupling and PPC" gives them, sizes as configured, seeded and vectorized samplers."""

import pytest
import torch

from sparselen.nn.batch import IGNORE
from sparselen.ppc.evaluate import first_lookup_distance
from sparselen.ppc.samples import random_offsets, skip_ids, to_batch
from sparselen.ppc.tasks import (addition, copy_repeat, parity_scratchpad, pointer_copy, task_kind, task_module,
                                 variable_assignment)
from sparselen.runtime.rng import generator

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


# each task's sampler settings for SIZES (parity_scratchpad: at most one marked bit per pair)
PARAMS = {copy_repeat: {}, addition: {}, variable_assignment: {}, pointer_copy: {}, parity_scratchpad: {"k": (1, 1)}}


@pytest.mark.parametrize("module", list(PARAMS), ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_seeded_and_vectorized(module):
    a = module.sample(SIZES, generator("t", 4), **PARAMS[module])
    b = module.sample(SIZES, generator("t", 4), **PARAMS[module])
    c = module.sample(SIZES, generator("t", 5), **PARAMS[module])
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.position_ids, b.position_ids)
    assert not torch.equal(a.tokens, c.tokens)
    # the prompt grows with the size exactly as the task defines it
    per_size = {copy_repeat: SIZES + 2, addition: 2 * SIZES + 4, variable_assignment: 4 * SIZES + 3,
                pointer_copy: 5 * SIZES + 1, parity_scratchpad: 2 * SIZES + 1}[module]
    assert torch.equal(a.prompt_len, per_size)
    # the longest first lookup the task states bounds every sample's, and is reached
    assert int(first_lookup_distance(a).max()) <= module.max_first_lookup(int(SIZES.max()), **PARAMS[module])
    assert int(a.position_ids.max()) <= module.max_coupled_id(int(SIZES.max()), **PARAMS[module])


@pytest.mark.parametrize("module", list(PARAMS), ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_every_response_ends_with_the_task_end_token_and_holds_it_nowhere_else(module):
    """Where a generated response ends is where the task's EOS first occurs in it."""
    s = module.sample(SIZES, generator("t", 8), **PARAMS[module])
    for i in range(len(s)):
        response = s.tokens[i, s.prompt_len[i]:s.length[i]].tolist()
        assert response[-1] == module.EOS and module.EOS not in response[:-1]


@pytest.mark.parametrize("module", list(PARAMS), ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_batch_alignment_and_offsets(module):
    s = module.sample(SIZES, generator("t", 6), **PARAMS[module])
    off = random_offsets(s, 80, generator("o", 0))
    b = to_batch(s, off)
    assert int(b.position_ids.max()) <= 80 and len(set(off.tolist())) > 1
    for i in range(len(s)):
        P, L = int(s.prompt_len[i]), int(s.length[i])
        # position t predicts token t+1 and its id, on response tokens only (the last one's too)
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
    with pytest.raises(ValueError, match=r"parity_scratchpad.k = \[1, 2\]: a sample of 1 pairs"):
        parity_scratchpad.sample(SIZES, generator("t", 7), k=(1, 2))
    with pytest.raises(ValueError, match="parity_scratchpad.k"):
        parity_scratchpad.sample(SIZES, generator("t", 7), k=(2, 1))


PARITY = {"even": 0, "odd": 1}  # the scratchpad's symbols, not the bits' 0 and 1


def reference_scratchpad(prompt):
    """Read the sparse-parity prompt independently: the marked bits in order, each with its
    index in the prompt, and the running parity over them, starting at 0 (even)."""
    assert prompt[-1] == "=" and len(prompt) % 2 == 1
    pairs = [(prompt[2 * i], prompt[2 * i + 1], 2 * i) for i in range(len(prompt) // 2)]
    assert all(x in "01" and m in "+-" for x, m, _ in pairs)
    marked = [(int(x), at) for x, m, at in pairs if m == "+"]
    running = [0]
    for x, _ in marked:
        running.append(running[-1] ^ x)
    return marked, running


@pytest.mark.parametrize("k", [(1, 1), (1, 3), (2, 4)])
def test_parity_scratchpad(k):
    sizes = torch.tensor([4, 5, 9, 6, 12, 7, 4, 8] * 4)
    s = parity_scratchpad.sample(sizes, generator("t", 10), k=k)
    ks, firsts = [], []
    for l, (prompt, pid, resp, rid), i in zip(sizes.tolist(), rows(parity_scratchpad, s), range(len(s))):
        assert len(prompt) == 2 * l + 1
        # "=" has id 0, the bit and marker of pair i the ids 2i - 1 and 2i
        assert pid == list(range(1, 2 * l + 1)) + [0]
        marked, running = reference_scratchpad(prompt)
        assert k[0] <= len(marked) <= k[1]
        ks.append(len(marked))
        # the scratchpad: the running parity, one token per marked bit, the last the answer; then "$"
        assert resp[-1] == "$" and [PARITY[p] for p in resp[:-1]] == running
        assert PARITY[resp[-2]] == sum(x for x, _ in marked) % 2
        # each token that predicts an entry carries the id of the bit it must read next; the
        # answer and "$" the id past the last pair: no marked bit follows
        assert rid[:-2] == [pid[at] for _, at in marked] and rid[-2:] == [2 * l + 1] * 2
        firsts.append(rid[0])
    assert set(ks) == set(range(k[0], k[1] + 1))
    assert len(set(firsts)) > 3  # the first id, where the first marked bit is, depends on the input


def test_parity_scratchpad_prediction_is_local_and_the_next_id_depends_on_the_input():
    """Each scratchpad token follows from the previous one and the token at the previous one's
    id alone; the next id is the next marked bit after the current id: found in the prompt."""
    s = parity_scratchpad.sample(torch.full((64,), 10), generator("t", 11), k=(1, 5))
    for prompt, pid, resp, rid in rows(parity_scratchpad, s):
        at_id = {i: tok for tok, i in zip(prompt, pid)}
        marked_ids = sorted(pid[i] for i in range(0, len(prompt) - 1, 2) if prompt[i + 1] == "+")
        for j in range(len(resp) - 2):
            assert PARITY[resp[j + 1]] == PARITY[resp[j]] ^ int(at_id[rid[j]])
            # the next marked bit after the current id, or past the last pair when none follows
            assert rid[j + 1] == min([i for i in marked_ids if i > rid[j]] + [len(prompt)])
        assert rid[0] == marked_ids[0] and rid[-1] == len(prompt) and resp[-1] == "$"
        assert rid[-2] not in at_id  # the answer finds no bit at its id: the response ends


def test_parity_scratchpad_dense_ids_step_regularly_whatever_the_bits():
    sizes = torch.tensor([3, 5, 8, 8, 8])
    s = parity_scratchpad.sample(sizes, generator("t", 12), dense=True)
    seen = {}
    for l, (prompt, pid, resp, rid) in zip(sizes.tolist(), rows(parity_scratchpad, s)):
        assert prompt[1::2][:l] == ["+"] * l and len(resp) == l + 2 and resp[-1] == "$"
        # the first id one more than "="'s, each next the previous plus 2; "$" keeps the last
        assert rid == list(range(1, 2 * l + 2, 2)) + [2 * l + 1]
        seen.setdefault(l, set()).add("".join(prompt[0::2]))
    assert len(seen[8]) == 3  # three different bit strings of 8 pairs, one set of ids
    assert not parity_scratchpad.ids_depend_on_input(dense=True) and parity_scratchpad.ids_depend_on_input()
    assert parity_scratchpad.max_first_lookup(8, dense=True) == 1


SKIPPED = {pointer_copy: {"line_length": (2, 4)}, variable_assignment: {"value_digits": (1, 3)},
           parity_scratchpad: {"k": (1, 1)}}


@pytest.mark.parametrize("module", list(SKIPPED), ids=lambda m: m.__name__.rsplit(".", 1)[1])
def test_id_skips_keep_the_coupling_and_lengthen_distances(module):
    """Skips fall before unit starts only, remap every id by value (a response token keeps the
    id of the prompt token it is coupled to, a unit its consecutive ids) and lengthen the id
    distances of lookups."""
    s = module.sample(SIZES, generator("t", 13), **SKIPPED[module])
    starts = module.unit_starts(s)
    t = skip_ids(s, starts, 2, 150, generator("skip", 0))
    assert int(t.position_ids.max()) <= 150 and torch.equal(t.tokens, s.tokens)
    grew = 0
    for i in range(len(s)):
        P, L = int(s.prompt_len[i]), int(s.length[i])
        old, new = s.position_ids[i, :L], t.position_ids[i, :L]
        shift = dict(zip(old.tolist(), (new - old).tolist()))
        assert all(shift[o] == n - o for o, n in zip(old.tolist(), new.tolist()))  # one map of id values
        # along the prompt in id order, the shift changes only at a unit start
        prompt = sorted(range(P), key=lambda j: int(old[j]))
        for a, b in zip(prompt, prompt[1:]):
            if new[b] - new[a] != old[b] - old[a]:
                assert starts[i, b]
        grew += int(first_lookup_distance(t.select([i]))) > int(first_lookup_distance(s.select([i])))
    assert grew > len(s) // 4
    in_prompt = torch.arange(s.tokens.shape[1])[None] < s.prompt_len[:, None]
    assert not starts[:, 0].any() and not (starts & ~in_prompt).any()


def test_unit_starts():
    s = pointer_copy.sample(torch.tensor([3]), generator("t", 14), num_keys=8)
    words = [pointer_copy.VOCAB[t] for t in s.tokens[0, :s.prompt_len[0]]]
    assert [w for w, u in zip(words, pointer_copy.unit_starts(s)[0]) if u] == [words[5], words[10], words[15]]
    assert words[15].startswith("?k")  # the second and third keys, and the query
    s = variable_assignment.sample(torch.tensor([3]), generator("t", 15), num_variables=8)
    words = [variable_assignment.VOCAB[t] for t in s.tokens[0, :s.prompt_len[0]]]
    assert [w for w, u in zip(words, variable_assignment.unit_starts(s)[0]) if u] == [words[4], words[8], "?"]
    s = parity_scratchpad.sample(torch.tensor([3]), generator("t", 16), k=(1, 1))
    assert parity_scratchpad.unit_starts(s)[0].nonzero().flatten().tolist() == [2, 4]  # bits of pairs 2 and 3


def test_task_forms():
    """A section named <task>_<form> runs that task: its own settings, runs and rows."""
    assert task_kind("parity_scratchpad_dense") == "parity_scratchpad" and task_module("pointer_copy") is pointer_copy
    assert task_kind("variable_assignment_digits") == "variable_assignment"
    with pytest.raises(ValueError, match="'sorting' is neither a task"):
        task_kind("sorting")


def found_by_content(prompt, resp) -> bool:
    """Whether each response token after the first is found by content: the token after ``v =``
    for the previous token v, or the end after a constant's one digit."""
    for prev, tok in zip(resp, resp[1:]):
        if prev.startswith("v"):
            lhs = [i for i in range(len(prompt) - 1) if prompt[i] == prev and prompt[i + 1] == "="]
            if len(lhs) != 1 or prompt[lhs[0] + 2] != tok:
                return False
        elif tok != "$":  # a digit after a digit: found by its place, not its content
            return False
    return True


@pytest.mark.parametrize("value_digits", [(1, 1), (1, 3)])
def test_controls_follow_from_the_task_structure(value_digits):
    """variable_assignment is a control exactly when every response token is found by content,
    which the samples show."""
    s = variable_assignment.sample(SIZES, generator("t", 17), num_variables=16, value_digits=value_digits)
    by_content = [found_by_content(prompt, resp) for prompt, _, resp, _ in rows(variable_assignment, s)]
    assert variable_assignment.found_by_content(value_digits=value_digits) == all(by_content)
    assert bool(variable_assignment.control(value_digits=value_digits)) == all(by_content)


def test_which_ids_depend_on_the_input():
    assert variable_assignment.ids_depend_on_input() and pointer_copy.ids_depend_on_input()
    assert not copy_repeat.ids_depend_on_input() and not addition.ids_depend_on_input()
