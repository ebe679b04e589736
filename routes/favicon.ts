/**
 * `GET /favicon.svg` and `/favicon.ico`: Runnel's icon, two waves on the
 * playground's accent blue. The pages link the SVG (by a relative URL, so
 * it works under a prefix); the ICO is there because browsers and tools ask
 * for `/favicon.ico` whatever a page links, and a 404 shows as a console
 * error. Both are public (they hold no data) and cached for a day, with an
 * ETag to revalidate.
 */
import { createHash } from 'node:crypto';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';

/** The icon; the ICO's PNG is this, drawn at 32 × 32 (by Chromium: an `<img>` of it, screenshot with no background). */
const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#2456d6"/>' +
  '<path d="M7 12.5q4.5-4 9 0t9 0M7 20.5q4.5-4 9 0t9 0" fill="none" stroke="#fff" stroke-width="2.6" stroke-linecap="round"/></svg>\n';

const PNG_32 = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAACAAAAAgCAYAAABzenr0AAACUElEQVR4nOyXT0hUURTGv3vn6Tij4kSRjeY0MVqZSRYtjAqjFpFQtCiD6B8VLWoVBDU7V2ULaWkL21SLwIGKolpVC4V2DYUJqfQqGZ1A0OrZNDPN7Z6HM/OoMf88nbuZ3+Zd3j3vfd89nHvgaLDgP/TRoxVNXQJYs4BoYoytxCIghPjKwMJy9TqZcN/UH66dSO+x9CJwuH8/46xbLquwtERESpwbDjU8yxiobRvYJ909Rx6RJlrJBPMd+7SsKGH0MwYv8kskJkQj1+LGKQXiRFWxYCc1Kd4MRZC2Jp/KDJA2ZWANFEHaHIrRZgtYUeFAy5Yy1PtL4F9VDH0sjgE9hldvfmB88jfs8l8DR/d6cOV4Jcrd2US1TD+/GSlcvxtF6OUE7MBq296Lv19y2Z66gz7s2lyaeZeUhx0c+YW61U5ojmxs3zsDwa4IRseT//zcu1xD+1mv/FbgYudITgM5M7Btgzsj/n0qhWt3onjSN4lYXMDlZDiwswLBE5Uoc3HsaCzF086AGfO4NxtzUMZcnY4hmupcCA/+xJwyIKsTXZdrzEbdfnsUYzOc7saFamzf5IY1Sx++xLDeVwKHpbx73xo43/EZiRwlk9PAfDiyx2Nmw1onaahOOu5F0fNi5jqxbYCgm7J7aznW1TgRqHZiSNYKZWIuN2VRDNih0AcKfaDQBwp9gMsBJApFkDbduDAUQdqycpgyA6TNk5zdkrObvXa2AEiTtLl+v16XTs4gzzCB06RtXt7hno0PaFaTywiWHhpOW4dCDY9MI9YdFeP5HwAAAP//NOl3hQAAAAZJREFUAwAUEVkJZlg8WAAAAABJRU5ErkJggg==',
  'base64',
);

/** An ICO file holding one PNG image (Windows Vista's format, which every current browser reads). */
function icoOf(png: Buffer, size: number): Buffer {
  const header = Buffer.alloc(22);
  header.writeUInt16LE(0, 0); // reserved
  header.writeUInt16LE(1, 2); // type: icon
  header.writeUInt16LE(1, 4); // one image
  header.writeUInt8(size, 6); // width
  header.writeUInt8(size, 7); // height
  header.writeUInt8(0, 8); // no palette
  header.writeUInt8(0, 9); // reserved
  header.writeUInt16LE(1, 10); // colour planes
  header.writeUInt16LE(32, 12); // bits per pixel
  header.writeUInt32LE(png.length, 14);
  header.writeUInt32LE(header.length, 18); // the image follows the header
  return Buffer.concat([header, png]);
}

const icons: { url: string; type: string; body: Buffer }[] = [
  { url: '/favicon.svg', type: 'image/svg+xml', body: Buffer.from(FAVICON_SVG) },
  { url: '/favicon.ico', type: 'image/x-icon', body: icoOf(PNG_32, 32) },
];

/** True when the request's `If-None-Match` names `etag` (or `*`). */
const matches = (header: string | undefined, etag: string): boolean =>
  header !== undefined && header.split(',').some((tag) => ['*', etag, `W/${etag}`].includes(tag.trim()));

/** Serves the icons; registered once, at the root. */
export const faviconRoutes: FastifyPluginAsync = async (app) => {
  for (const icon of icons) {
    const etag = `"${createHash('sha256').update(icon.body).digest('base64url').slice(0, 16)}"`;
    app.get(icon.url, { config: { public: true }, schema: { hide: true } }, (request: FastifyRequest, reply: FastifyReply) => {
      void reply
        .header('cache-control', 'public, max-age=86400')
        .header('etag', etag)
        .header('x-content-type-options', 'nosniff')
        // An SVG opened on its own is a document: it may run nothing and load nothing.
        .header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'");
      if (matches(request.headers['if-none-match'], etag)) return reply.code(304).send();
      return reply.type(icon.type).send(icon.body);
    });
  }
};
