import { DYNAMODB_ITEM_LIMIT_BYTES, type ItemSizes } from '../item-size.ts';
import { type Figure, figure } from '../report.ts';

/** A full m5.24xlarge's node item, with secondary IPs and with /28 prefixes, against DynamoDB's item limit. */
export function itemSizeFigures(itemSizes: ItemSizes): Figure[] {
  return [
    figure({
      id: 'item_size_m5_24xlarge_ips',
      label: 'node item size, m5.24xlarge full, secondary IPs',
      value: itemSizes.ipsBytes,
      reference: DYNAMODB_ITEM_LIMIT_BYTES,
      referenceKind: 'limit',
      unit: 'bytes',
      note: 'dynamoItemSizeBytes (DynamoDB sizing rules) of a realistic record: 15 ENIs x 49 secondary IPs, our tags on every created ENI, knobs, VPC, a lease and a recorded error; limit 400 KB.',
    }),
    figure({
      id: 'item_size_m5_24xlarge_prefixes',
      label: 'node item size, m5.24xlarge full, /28 prefixes',
      value: itemSizes.prefixesBytes,
      reference: DYNAMODB_ITEM_LIMIT_BYTES,
      referenceKind: 'limit',
      unit: 'bytes',
      note: `the same record with 15 x 49 /28 prefixes stored as prefixes (11,760 addresses); expanded to single IPs it would be ${itemSizes.prefixesExpandedBytes} bytes.`,
    }),
  ];
}
