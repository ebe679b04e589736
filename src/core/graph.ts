/**
 * The shape of a composition as nodes and edges, for docs and debugging.
 * Each runnable adds itself (a node, or its children) and says which of its
 * nodes come first and last, so composites can wire them together.
 */

/** A node of a {@link Graph}. */
export interface GraphNode {
  id: string;
  name: string;
  kind: 'runnable' | 'input' | 'output';
}

/** An edge of a {@link Graph}; `conditional` edges are taken only when a branch condition holds. */
export interface GraphEdge {
  source: string;
  target: string;
  conditional?: boolean;
  label?: string;
}

/** The nodes where a runnable's part of the graph starts and ends. */
export interface GraphSpan {
  first: string[];
  last: string[];
}

function mermaidLabel(name: string): string {
  return `"${name.replace(/"/g, '#quot;').replace(/</g, '#lt;').replace(/>/g, '#gt;')}"`;
}

/**
 * Nodes and edges of a composition, from `runnable.getGraph()`.
 *
 * @example
 * sequence(prompt, model, parser).getGraph().toMermaid()
 */
export class Graph {
  readonly nodes: GraphNode[] = [];
  readonly edges: GraphEdge[] = [];

  /** Adds a node and returns its id. */
  addNode(name: string, kind: GraphNode['kind'] = 'runnable'): string {
    const id = `n${this.nodes.length}`;
    this.nodes.push({ id, name, kind });
    return id;
  }

  /** Connects every node in `sources` to every node in `targets`. */
  connect(sources: readonly string[], targets: readonly string[], edge: { conditional?: boolean; label?: string } = {}): void {
    for (const source of sources) for (const target of targets) this.edges.push({ source, target, ...edge });
  }

  /** Plain data: `{nodes, edges}`. */
  toJSON(): { nodes: GraphNode[]; edges: GraphEdge[] } {
    return { nodes: this.nodes, edges: this.edges };
  }

  /** A Mermaid flowchart of the graph. */
  toMermaid(): string {
    const lines = ['graph TD;'];
    for (const node of this.nodes) {
      const label = mermaidLabel(node.name);
      if (node.kind === 'input') lines.push(`\t${node.id}([${label}]):::first`);
      else if (node.kind === 'output') lines.push(`\t${node.id}([${label}]):::last`);
      else lines.push(`\t${node.id}(${label})`);
    }
    for (const edge of this.edges) {
      if (edge.conditional === true) {
        const label = edge.label === undefined ? '' : ` ${mermaidLabel(edge.label)} `;
        lines.push(label === '' ? `\t${edge.source} -.-> ${edge.target};` : `\t${edge.source} -.${label}.-> ${edge.target};`);
      } else {
        lines.push(`\t${edge.source} --> ${edge.target};`);
      }
    }
    lines.push('\tclassDef default fill:#f2f0ff,line-height:1.2', '\tclassDef first fill-opacity:0', '\tclassDef last fill:#bfb6fc');
    return `${lines.join('\n')}\n`;
  }
}
