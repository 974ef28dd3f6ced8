import { describe, expect, inject, it } from 'vitest';
import { dynamoItemSizeBytes } from '../support/item-size.ts';
import {
  bucketFloorSeconds,
  floorReadyNodes,
  formatNumber,
  formatRatio,
  longestSequentialChain,
  median,
  necessaryMutatingCalls,
  parseMix,
  ratioTo,
  scaledClock,
  seededRandom,
  tokenBucketFloor,
} from './floors.ts';
import { DYNAMODB_ITEM_LIMIT_BYTES, m5x24ItemSizes } from './item-size.ts';
import { figure, renderMarkdownFigures, renderTable } from './report.ts';
import { runBench } from './run.ts';
import { renderReadyChart } from './svg.ts';

describe('token-bucket floors', () => {
  it('is max(0, (calls - burst) / refill) per action', () => {
    expect(bucketFloorSeconds(50, { burst: 100, refillPerSecond: 5 })).toBe(0);
    expect(bucketFloorSeconds(200, { burst: 100, refillPerSecond: 5 })).toBe(20);
    expect(bucketFloorSeconds(200, { burst: 50, refillPerSecond: 5 })).toBe(30);
    expect(() => bucketFloorSeconds(1, { burst: 1, refillPerSecond: 0 })).toThrow(RangeError);
  });

  it("takes the largest action floor with AWS's buckets: the 200-ENI example of test/README.md binds on attach at 30 s", () => {
    const floor = tokenBucketFloor(necessaryMutatingCalls(200, 0));
    expect(floor.seconds).toBe(30);
    expect(floor.bindingAction).toBe('AttachNetworkInterface');
    expect(floor.actions.map((action) => [action.action, action.seconds])).toEqual([
      ['AttachNetworkInterface', 30],
      ['CreateNetworkInterface', 20],
      ['ModifyNetworkInterfaceAttribute', 20],
    ]);
  });

  it('is 0 when every action fits in its burst, and ignores actions without calls', () => {
    const floor = tokenBucketFloor({ AssignPrivateIpAddresses: 100, CreateNetworkInterface: 0 });
    expect(floor.seconds).toBe(0);
    expect(floor.actions).toHaveLength(1);
    expect(tokenBucketFloor({}).seconds).toBe(0);
  });

  it('draws a floor curve that reaches every node exactly at the floor time', () => {
    const floor = tokenBucketFloor(necessaryMutatingCalls(200, 0));
    expect(floorReadyNodes(floor, 100, 0)).toBe(25); // attach: 50 of 200 calls at once
    expect(floorReadyNodes(floor, 100, 15)).toBe(62); // attach: 125 of 200
    expect(floorReadyNodes(floor, 100, 29.9)).toBeLessThan(100);
    expect(floorReadyNodes(floor, 100, 30)).toBe(100);
    expect(floorReadyNodes(floor, 100, 300)).toBe(100);
  });
});

describe('ratios and numbers', () => {
  it('prints value / floor, and words where a floor of 0 has no ratio', () => {
    expect(formatRatio(12, 8)).toBe('1.50x');
    expect(formatRatio(3, 3)).toBe('1.00x');
    expect(formatRatio(0, 0)).toBe('at floor');
    expect(formatRatio(4, 0)).toBe('above floor 0');
    expect(formatRatio(undefined, 3)).toBe('n/a');
    expect(formatRatio(3, undefined)).toBe('n/a');
    expect(ratioTo(12, 8)).toBe(1.5);
    expect(ratioTo(1, 0)).toBeUndefined();
  });

  it('formats numbers for the table', () => {
    expect(formatNumber(3)).toBe('3');
    expect(formatNumber(2.5)).toBe('2.5');
    expect(formatNumber(1 / 3)).toBe('0.33');
    expect(formatNumber(undefined)).toBe('n/a');
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(median([])).toBeUndefined();
  });

  it('renders a figure in the table and the Markdown report beside its floor', () => {
    const figures = [
      figure({ id: 'a', label: 'calls per ENI', value: 4.5, reference: 3, unit: 'calls/ENI', note: 'n' }),
      figure({ id: 'b', label: 'retries', value: 0, reference: 0, unit: 'calls', note: 'n' }),
      figure({
        id: 'c',
        label: 'item | size',
        value: 20_000,
        reference: 409_600,
        referenceKind: 'limit',
        unit: 'bytes',
        note: 'n',
      }),
    ];
    expect(figures[0]?.ratio).toBe(1.5);
    const table = renderTable(figures);
    expect(table.split('\n')[1]).toMatch(/^calls per ENI\s+4\.5\s+3\s+1\.50x\s+calls\/ENI$/);
    expect(table).toContain('at floor');
    expect(table).toContain('limit 409600');
    const markdown = renderMarkdownFigures(figures);
    expect(markdown).toContain('| calls per ENI | 4.5 | 3 | 1.50x | calls/ENI |');
    expect(markdown).toContain('| item \\| size |');
  });
});

describe('sequential round trips', () => {
  it('counts overlapping calls as one step and chains the rest', () => {
    const chain = longestSequentialChain([
      { name: 'describe instance', startMs: 0, endMs: 10 },
      { name: 'describe vpc', startMs: 11, endMs: 20 },
      { name: 'describe types', startMs: 11, endMs: 19 },
      { name: 'describe subnets', startMs: 12, endMs: 22 },
      { name: 'claim', startMs: 23, endMs: 30 },
      { name: 'create', startMs: 30, endMs: 40 },
    ]);
    expect(chain.map((step) => step.name)).toEqual([
      'describe instance',
      'describe types',
      'claim',
      'create',
    ]);
    expect(longestSequentialChain([])).toEqual([]);
  });
});

describe('helpers', () => {
  it('runs a scaled clock from its start', () => {
    let real = 1_000;
    const clock = scaledClock(10, () => real);
    expect(clock()).toBe(1_000);
    real = 1_500;
    expect(clock()).toBe(6_000);
    expect(() => scaledClock(0)).toThrow(RangeError);
  });

  it('draws the same duplicate decisions for the same seed', () => {
    const first = seededRandom(7);
    const second = seededRandom(7);
    const draws = Array.from({ length: 5 }, () => first());
    expect(Array.from({ length: 5 }, () => second())).toEqual(draws);
    expect(draws.every((value) => value >= 0 && value < 1)).toBe(true);
  });

  it('parses a mix into a launch order', () => {
    expect(parseMix('m5.large:2,t3.medium:1')).toEqual(['m5.large', 'm5.large', 't3.medium']);
    expect(parseMix('c5.xlarge')).toEqual(['c5.xlarge']);
    expect(() => parseMix('m5.large:0')).toThrow(/weight/);
    expect(() => parseMix('')).toThrow(/no instance type/);
  });

  it('sizes a full m5.24xlarge record well under 400 KB, prefixes stored as prefixes', () => {
    const sizes = m5x24ItemSizes();
    expect(sizes.records.ips.enis).toHaveLength(15);
    expect(sizes.records.ips.enis.flatMap((eni) => eni.secondaryIps)).toHaveLength(735);
    expect(sizes.records.prefixes.enis.flatMap((eni) => eni.prefixes)).toHaveLength(735);
    expect(sizes.ipsBytes).toBe(dynamoItemSizeBytes(sizes.records.ips));
    expect(sizes.ipsBytes).toBeLessThan(DYNAMODB_ITEM_LIMIT_BYTES / 10);
    expect(sizes.prefixesBytes).toBeLessThan(DYNAMODB_ITEM_LIMIT_BYTES / 10);
    // 11,760 single IPs instead of 735 prefixes: about seven times the stored record.
    expect(sizes.prefixesExpandedBytes).toBeGreaterThan(5 * sizes.prefixesBytes);
  });
});

describe('the chart', () => {
  it('draws axes, a line for nodes ready and a dashed floor', () => {
    const floor = tokenBucketFloor(necessaryMutatingCalls(200, 0));
    const svg = renderReadyChart({
      title: '4 nodes <test>',
      readySeconds: [3, 1, 2, 40],
      nodes: 4,
      floorAt: (seconds) => floorReadyNodes(floor, 4, seconds),
      floorSeconds: floor.seconds,
    });
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg).toContain('4 nodes &lt;test&gt;');
    expect(svg).toMatch(/<polyline class="ready" points="[^"]+"/);
    expect(svg).toMatch(/<polyline class="floor" points="[^"]+"[^>]*stroke-dasharray/);
    expect(svg).toContain('nodes ready (4 of 4)');
    expect(svg).toContain('all ready at 30 s');
    // One step up per node: the start, two points per node, the right edge.
    const readyPoints = /<polyline class="ready" points="([^"]+)"/.exec(svg)?.[1]?.split(' ') ?? [];
    expect(readyPoints).toHaveLength(1 + 2 * 4 + 1);
    expect(svg).not.toMatch(/NaN|Infinity/);
  });
});

describe('a tiny bench run', () => {
  it('reports every figure for 3 nodes', { timeout: 300_000 }, async () => {
    const { report, chartSvg } = await runBench({
      nodes: 3,
      mix: 'm5.large:1,t3.medium:1',
      firstInterfaceIndex: 1,
      prefixDelegation: false,
      duplicateEvents: 0.5,
      scale: 1,
      concurrency: 2,
      importRuns: 1,
      timeoutSeconds: 240,
      dynamoDbEndpoint: inject('dynamoDbEndpoint'),
      // The demand and naive-bundle phases take minutes: npm run bench runs them.
      demandNodes: 0,
      sweepCostNodes: [3],
      naiveBaseline: false,
    });
    const ids = report.figures.map((item) => item.id);
    expect(ids).toEqual(
      expect.arrayContaining([
        'mutating_calls_per_new_eni',
        'mutating_calls_per_node',
        'non_mutating_calls_per_node',
        'throttled_retries',
        'denied_ec2_calls',
        'denied_k8s_requests',
        'denied_lambda_invokes',
        'time_to_last_ready',
        'single_node_round_trips',
        'ddb_condition_failures_per_write',
        'k8s_writes_per_changing_sync',
        'k8s_writes_per_noop_sync',
        'item_size_m5_24xlarge_ips',
        'item_size_m5_24xlarge_prefixes',
        'bundle_bytes_Allocate',
        'init_ms_Allocate',
        'bundle_bytes_Sync',
        'init_ms_Sync',
      ]),
    );
    for (const item of report.figures) {
      expect({ id: item.id, value: Number.isFinite(item.value) }).toEqual({ id: item.id, value: true });
      expect({ id: item.id, reference: Number.isFinite(item.reference) }).toEqual({
        id: item.id,
        reference: true,
      });
      expect(item.ratioText).not.toBe('n/a');
    }
    expect(report.readyNodes).toBe(3);
    // Authorization is enforced: the synthesized roles allow every call the functions make.
    const value = (id: string) => report.figures.find((item) => item.id === id)?.value;
    expect({
      ec2: value('denied_ec2_calls'),
      k8s: value('denied_k8s_requests'),
      lambda: value('denied_lambda_invokes'),
    }).toEqual({ ec2: 0, k8s: 0, lambda: 0 });
    expect(report.burst.invariantViolations).toBe(0);
    // first-interface-index 1: every node needed a new ENI, and one alone needs at least 8 round trips
    // (delete-on-termination is set after the pool is published, off the path).
    expect(report.burst.newEnis).toBeGreaterThanOrEqual(3);
    expect(report.singleNode?.floor).toBe(8);
    expect(chartSvg).toContain('nodes ready (3 of 3)');
    // Steady state: the scheduled work finds every node as published and writes nothing; the
    // resync reads nothing but its Scan (a node in sync with its listed record is not read again).
    const [steady] = report.sweepCosts;
    const writes = (cost: { dynamoDbWrites: number; kubernetesWrites: number }) => ({
      dynamoDb: cost.dynamoDbWrites,
      kubernetes: cost.kubernetesWrites,
    });
    expect({
      nodes: steady?.nodes,
      sweep: steady && writes(steady),
      resync: steady && writes(steady.resync),
      gc: steady && writes(steady.garbageCollection),
      resyncReadUnits: steady?.resync.dynamoDbReadUnits,
    }).toEqual({
      nodes: 3,
      sweep: { dynamoDb: 0, kubernetes: 0 },
      resync: { dynamoDb: 0, kubernetes: 0 },
      gc: { dynamoDb: 0, kubernetes: 0 },
      resyncReadUnits: steady?.dynamoDbReadUnits,
    });
  });
});
