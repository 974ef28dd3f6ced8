/**
 * The bench chart, hand-written SVG: nodes ready over (simulated) time as a step line, the
 * token-bucket floor curve dashed, and a dashed vertical marker where the floor reaches every node.
 */

export interface ReadyChartInput {
  readonly title: string;
  /** Seconds after the launch at which each node became ready (any order). */
  readonly readySeconds: readonly number[];
  readonly nodes: number;
  /** The floor curve: best possible ready nodes at a time, e.g. `floorReadyNodes`. */
  readonly floorAt: (seconds: number) => number;
  /** Where the floor reaches every node. */
  readonly floorSeconds: number;
}

const WIDTH = 720;
const HEIGHT = 420;
const MARGIN = { left: 64, right: 24, top: 48, bottom: 56 };

export function renderReadyChart(input: ReadyChartInput): string {
  const ready = [...input.readySeconds].filter(Number.isFinite).sort((left, right) => left - right);
  const lastReady = ready.at(-1) ?? 0;
  const xMax = niceCeiling(Math.max(lastReady, input.floorSeconds, 1) * 1.05);
  const yMax = Math.max(1, input.nodes);
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const plotHeight = HEIGHT - MARGIN.top - MARGIN.bottom;
  const x = (seconds: number) => MARGIN.left + (Math.min(Math.max(seconds, 0), xMax) / xMax) * plotWidth;
  const y = (count: number) =>
    MARGIN.top + plotHeight - (Math.min(Math.max(count, 0), yMax) / yMax) * plotHeight;

  // Ready nodes: a step up at each ready time, held to the right edge.
  const readyPoints: string[] = [`${fmt(x(0))},${fmt(y(0))}`];
  ready.forEach((seconds, index) => {
    readyPoints.push(`${fmt(x(seconds))},${fmt(y(index))}`, `${fmt(x(seconds))},${fmt(y(index + 1))}`);
  });
  readyPoints.push(`${fmt(x(xMax))},${fmt(y(ready.length))}`);

  const samples = 120;
  const floorPoints = Array.from({ length: samples + 1 }, (_, index) => {
    const seconds = (xMax * index) / samples;
    return `${fmt(x(seconds))},${fmt(y(input.floorAt(seconds)))}`;
  });

  const xTicks = ticks(xMax);
  const yTicks = ticks(yMax);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<title>${escapeXml(input.title)}</title>`,
    `<rect x="0" y="0" width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${WIDTH / 2}" y="24" text-anchor="middle" font-size="14">${escapeXml(input.title)}</text>`,
    // axes
    `<line x1="${MARGIN.left}" y1="${MARGIN.top + plotHeight}" x2="${MARGIN.left + plotWidth}" y2="${MARGIN.top + plotHeight}" stroke="black"/>`,
    `<line x1="${MARGIN.left}" y1="${MARGIN.top}" x2="${MARGIN.left}" y2="${MARGIN.top + plotHeight}" stroke="black"/>`,
    ...xTicks.map(
      (tick) =>
        `<line x1="${fmt(x(tick))}" y1="${MARGIN.top + plotHeight}" x2="${fmt(x(tick))}" y2="${MARGIN.top + plotHeight + 5}" stroke="black"/>` +
        `<text x="${fmt(x(tick))}" y="${MARGIN.top + plotHeight + 18}" text-anchor="middle">${formatTick(tick)}</text>`,
    ),
    ...yTicks.map(
      (tick) =>
        `<line x1="${MARGIN.left - 5}" y1="${fmt(y(tick))}" x2="${MARGIN.left}" y2="${fmt(y(tick))}" stroke="black"/>` +
        `<line x1="${MARGIN.left}" y1="${fmt(y(tick))}" x2="${MARGIN.left + plotWidth}" y2="${fmt(y(tick))}" stroke="#eee"/>` +
        `<text x="${MARGIN.left - 8}" y="${fmt(y(tick) + 4)}" text-anchor="end">${formatTick(tick)}</text>`,
    ),
    `<text x="${MARGIN.left + plotWidth / 2}" y="${HEIGHT - 14}" text-anchor="middle">simulated seconds after the launch</text>`,
    `<text x="16" y="${MARGIN.top + plotHeight / 2}" text-anchor="middle" transform="rotate(-90 16 ${MARGIN.top + plotHeight / 2})">nodes with a ready pool</text>`,
    // floor
    `<polyline class="floor" points="${floorPoints.join(' ')}" fill="none" stroke="#888" stroke-width="1.5" stroke-dasharray="6 4"/>`,
    `<line class="floor-marker" x1="${fmt(x(input.floorSeconds))}" y1="${MARGIN.top}" x2="${fmt(x(input.floorSeconds))}" y2="${MARGIN.top + plotHeight}" stroke="#888" stroke-dasharray="2 4"/>`,
    // ready
    `<polyline class="ready" points="${readyPoints.join(' ')}" fill="none" stroke="#1f77b4" stroke-width="2"/>`,
    // legend
    `<line x1="${MARGIN.left + 12}" y1="${MARGIN.top + 12}" x2="${MARGIN.left + 40}" y2="${MARGIN.top + 12}" stroke="#1f77b4" stroke-width="2"/>`,
    `<text x="${MARGIN.left + 46}" y="${MARGIN.top + 16}">nodes ready (${ready.length} of ${input.nodes})</text>`,
    `<line x1="${MARGIN.left + 12}" y1="${MARGIN.top + 30}" x2="${MARGIN.left + 40}" y2="${MARGIN.top + 30}" stroke="#888" stroke-width="1.5" stroke-dasharray="6 4"/>`,
    `<text x="${MARGIN.left + 46}" y="${MARGIN.top + 34}">token-bucket floor (all ready at ${formatTick(input.floorSeconds)} s)</text>`,
    '</svg>',
  ];
  return `${parts.join('\n')}\n`;
}

function ticks(max: number): number[] {
  const step = niceStep(max / 6);
  const result: number[] = [];
  for (let tick = 0; tick <= max + step / 1000 && result.length < 50; tick += step) result.push(tick);
  return result;
}

function niceStep(raw: number): number {
  const power = 10 ** Math.floor(Math.log10(Math.max(raw, 1e-9)));
  const fraction = raw / power;
  const nice = fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10;
  return nice * power;
}

function niceCeiling(value: number): number {
  const step = niceStep(value / 6);
  return Math.ceil(value / step) * step;
}

function formatTick(value: number): string {
  return Number.isInteger(value) ? String(value) : value.toFixed(1);
}

function fmt(value: number): string {
  return value.toFixed(1);
}

function escapeXml(text: string): string {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}
