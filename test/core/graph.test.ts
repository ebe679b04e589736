import { describe, expect, it } from 'vitest';
import { branch, lambda, parallel, sequence } from '../../src/index.js';

const named = (name: string) => lambda((x: unknown) => x, { name });

describe('getGraph', () => {
  it('draws a sequence as a chain between input and output', () => {
    const graph = sequence(named('a'), named('b')).getGraph();
    expect(graph.nodes.map((n) => n.name)).toEqual(['RunnableSequenceInput', 'a', 'b', 'RunnableSequenceOutput']);
    const byId = new Map(graph.nodes.map((n) => [n.id, n.name]));
    const edges = graph.edges.map((e) => `${byId.get(e.source)}->${byId.get(e.target)}`);
    expect(edges.sort()).toEqual(['RunnableSequenceInput->a', 'a->b', 'b->RunnableSequenceOutput'].sort());
  });

  it('fans a parallel out and in, and marks branch edges conditional', () => {
    const graph = sequence(named('start'), parallel({ x: named('x'), y: named('y') }), named('end')).getGraph();
    const byId = new Map(graph.nodes.map((n) => [n.id, n.name]));
    const edges = graph.edges.map((e) => `${byId.get(e.source)}->${byId.get(e.target)}`);
    expect(edges).toEqual(expect.arrayContaining(['start->x', 'start->y', 'x->end', 'y->end']));

    const choice = branch([named('cond'), named('yes')], named('no')).getGraph();
    expect(choice.edges.filter((e) => e.conditional === true)).toHaveLength(2);
  });

  it('renders Mermaid', () => {
    const mermaid = sequence(named('a'), named('<b>')).getGraph().toMermaid();
    expect(mermaid.startsWith('graph TD;\n')).toBe(true);
    expect(mermaid).toContain('("a")');
    expect(mermaid).toContain('#lt;b#gt;');
    expect(mermaid).toMatch(/n1 --> n2;/);
  });
});
